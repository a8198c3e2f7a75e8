/**
 * Importing policy documents: each document goes to the importer of its
 * system (Istio, Kuma, Kubernetes), Canopy config documents are taken as
 * they are, and the resulting services are checked by the same validation as
 * any config, so an import never yields a config `canopy serve` would refuse.
 */
import { loadAll } from 'js-yaml';
import type { FieldError, ValidationResult } from '../domain/errors.js';
import { parseConfig, type CanopyConfig } from '../domain/spec.js';
import { Findings, isObject, readDocuments, type Obj, type PolicyDocument, type SourceText } from './documents.js';
import { importIstio, isIstio } from './istio.js';
import { importKubernetes, isKubernetes } from './k8s.js';
import { importKuma, isKuma } from './kuma.js';
import { mayHoldPolicyDocuments } from './sniff.js';

export type PolicySystem = 'istio' | 'kuma' | 'k8s';
export const POLICY_SYSTEMS: readonly PolicySystem[] = ['istio', 'kuma', 'k8s'];

const IMPORTERS: Readonly<
  Record<
    PolicySystem,
    { is: (d: Obj) => boolean; run: (docs: readonly PolicyDocument[], f: Findings) => Obj[]; title: string }
  >
> = {
  istio: {
    is: isIstio,
    run: importIstio,
    title: 'an Istio document (networking.istio.io DestinationRule or ServiceEntry)',
  },
  kuma: { is: isKuma, run: importKuma, title: 'a Kuma document (MeshLoadBalancingStrategy or Dataplane)' },
  k8s: { is: isKubernetes, run: importKubernetes, title: 'a Kubernetes Service or EndpointSlice' },
};

export interface ImportOutcome {
  /** The Canopy config, or the errors (import errors first, then validation). */
  readonly result: ValidationResult<CanopyConfig>;
  /** What was not imported, or behaves differently from the source system. */
  readonly notes: readonly FieldError[];
  /** The imported services as config entries (what `canopy import` prints). */
  readonly services: readonly Obj[];
}

function systemOf(doc: unknown): PolicySystem | 'canopy' | undefined {
  if (!isObject(doc)) return undefined;
  for (const s of POLICY_SYSTEMS) if (IMPORTERS[s].is(doc)) return s;
  if (doc['apiVersion'] === undefined && doc['kind'] === undefined && doc['type'] === undefined) return 'canopy';
  return undefined;
}

/**
 * Imports documents. With `system`, every document must be of that system;
 * without, each goes to its own importer and Canopy config documents merge in.
 */
export function importDocuments(sources: readonly SourceText[], system?: PolicySystem): ImportOutcome {
  const f = new Findings();
  const docs = readDocuments(sources, f);
  const bySystem = new Map<PolicySystem, PolicyDocument[]>();
  const native: Obj[] = [];
  let server: unknown;
  for (const d of docs) {
    const s = systemOf(d.value);
    if (system && s !== system) {
      f.error(d.at, `is not ${IMPORTERS[system].title}`);
    } else if (s === 'canopy') {
      const o = d.value as Obj;
      if (Array.isArray(o['services'])) native.push(...(o['services'] as Obj[]));
      else if (o['services'] !== undefined) f.error(`${d.at}.services`, 'must be a list of services');
      if (o['server'] !== undefined) server = o['server'];
      for (const k of Object.keys(o))
        if (k !== 'services' && k !== 'server')
          f.error(`${d.at}.${k}`, 'unknown field (expected one of: services, server)');
    } else if (s) {
      bySystem.set(s, [...(bySystem.get(s) ?? []), d]);
    } else {
      f.error(d.at, 'is not a Canopy config, nor an Istio, Kuma or Kubernetes document this importer reads');
    }
  }
  const imported: Obj[] = [];
  for (const s of POLICY_SYSTEMS) {
    const list = bySystem.get(s);
    if (list) imported.push(...IMPORTERS[s].run(list, f));
  }
  const services = [...native, ...imported];
  if (f.errors.length > 0) return { result: { ok: false, errors: f.errors }, notes: f.notes, services };
  const parsed = parseConfig({ services, ...(server !== undefined ? { server } : {}) });
  if (!parsed.ok) {
    // Paths point into the generated config; name the service so the source is easy to find.
    const errors = parsed.errors.map((e) => {
      const i = /^services\[(\d+)\]/.exec(e.path)?.[1];
      const name = i !== undefined ? services[Number(i)]?.['name'] : undefined;
      return typeof name === 'string' ? { path: e.path, message: `${e.message} (imported service "${name}")` } : e;
    });
    return { result: { ok: false, errors }, notes: f.notes, services };
  }
  return { result: { ok: true, value: { ...parsed.value, notes: f.notes } }, notes: f.notes, services };
}

/** Does this text hold any Istio, Kuma or Kubernetes document (so `serve --config` should import it)? */
export function holdsPolicyDocuments(text: string): boolean {
  // A large Canopy config is not parsed twice.
  if (!mayHoldPolicyDocuments(text)) return false;
  try {
    return loadAll(text).some((d) => {
      const s = systemOf(d);
      return s !== undefined && s !== 'canopy';
    });
  } catch {
    return false;
  }
}
