/**
 * A live Kuma MeshLoadBalancingStrategy (kuma.io/v1alpha1) → the loadBalancing
 * of the Kubernetes Services its `to[].targetRef`s name, read by the same
 * rules as `canopy import kuma` (policy/kuma.ts strategyEntries). Pure: the
 * watch is kube/kube-kuma.ts.
 *
 * What a targetRef names, as Kuma spells a Kubernetes Service:
 * - `kind: Mesh`: every Service Canopy watches (`*`);
 * - `kind: MeshService, name: web_shop_svc_8080`: the `kuma.io/service` tag
 *   Kuma gives the Service `web` in `shop` (any port of it);
 * - `kind: MeshService, name: web` with `namespace: shop` (default: the
 *   policy's namespace), or `labels: {kuma.io/display-name: web,
 *   k8s.kuma.io/namespace: shop}`: the MeshService of that Service.
 * `sectionName` (a port) is not read: the policy applies to every port.
 */
import type { FieldError } from '../domain/errors.js';
import { describe, Findings, isObject, join, type Obj } from './documents.js';
import { strategyEntries } from './kuma.js';
import { serviceKey } from './k8s-live.js';

export const KUMA_GROUP = 'kuma.io';
/** Every Service Canopy watches. */
export const EVERY_SERVICE = '*';

export interface LiveStrategyTarget {
  /** A Service as `serviceKey` (`web.shop`), or EVERY_SERVICE for `kind: Mesh`. */
  readonly key: string;
  readonly loadBalancing: Obj;
}

export interface LiveStrategy {
  readonly targets: readonly LiveStrategyTarget[];
  /** What Canopy cannot read; the Services the policy names are refused while they stand. */
  readonly errors: readonly FieldError[];
}

const LEGACY_NAME = /^(.+)_(.+)_svc_\d+$/;

/** `at` names the policy (`MeshLoadBalancingStrategy NS/NAME`); errors read `AT: spec.to[0]…`. */
export function readLiveStrategy(spec: unknown, namespace: string, at: string): LiveStrategy {
  const f = new Findings();
  const entries = strategyEntries(f, { spec }, '');
  const targets: LiveStrategyTarget[] = [];
  for (const e of entries) {
    const key = targetOf(f, e.ref, join(e.path, 'targetRef'), namespace);
    if (key !== undefined) targets.push({ key, loadBalancing: e.loadBalancing });
  }
  return { targets, errors: f.errors.map((e) => ({ path: `${at}: ${e.path}`, message: e.message })) };
}

function targetOf(f: Findings, ref: Obj, path: string, policyNamespace: string): string | undefined {
  if (ref['kind'] === 'Mesh') return EVERY_SERVICE;
  if (ref['kind'] !== 'MeshService')
    return f.error(join(path, 'kind'), `${describe(ref['kind'])} is not read live: give Mesh or MeshService`);
  const labels = isObject(ref['labels']) ? ref['labels'] : undefined;
  const name = ref['name'] ?? labels?.['kuma.io/display-name'];
  const ns = ref['namespace'] ?? labels?.['k8s.kuma.io/namespace'] ?? policyNamespace;
  if (typeof name !== 'string' || name === '')
    return f.error(path, 'needs a name (or labels with kuma.io/display-name)');
  if (typeof ns !== 'string' || ns === '') return f.error(join(path, 'namespace'), 'must be a namespace');
  const legacy = LEGACY_NAME.exec(name);
  return legacy ? serviceKey(legacy[2]!, legacy[1]!) : serviceKey(ns, name);
}
