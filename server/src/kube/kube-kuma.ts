/**
 * Kuma MeshLoadBalancingStrategies for the Kubernetes source, read live when
 * Kuma's CRDs are installed (kube/kube-crds.ts notices them): each policy is
 * read once per change (policy/kuma-live.ts) and kept with the Services it
 * names. A Service takes the oldest policy naming it, else the oldest that
 * targets the whole Mesh.
 */
import type { KubernetesObject } from '@kubernetes/client-node';
import type { LiveMeshStrategy } from '../policy/k8s-live.js';
import { EVERY_SERVICE, KUMA_GROUP, readLiveStrategy, type LiveStrategy } from '../policy/kuma-live.js';
import { createdAt, type LivePolicies } from './kube-crds.js';

interface Held extends LiveStrategy {
  readonly at: string;
  readonly created: string;
}

export class MeshStrategies implements LivePolicies {
  readonly kind = 'meshloadbalancingstrategy';
  readonly group = KUMA_GROUP;
  readonly version = 'v1alpha1';
  readonly plural = 'meshloadbalancingstrategies';
  readonly what = 'Kuma MeshLoadBalancingStrategies';
  /** By policy (`namespace/name`), oldest first. */
  private held: [string, Held][] = [];

  get(key: string): LiveMeshStrategy | undefined {
    const pick = (k: string) => this.held.find(([, h]) => h.targets.some((t) => t.key === k))?.[1];
    const h = pick(key) ?? pick(EVERY_SERVICE);
    if (!h) return undefined;
    const target = h.targets.find((t) => t.key === key) ?? h.targets.find((t) => t.key === EVERY_SERVICE)!;
    return { at: h.at, loadBalancing: target.loadBalancing, errors: h.errors };
  }

  change(o: KubernetesObject & { spec?: unknown }, present: boolean): string[] {
    const ns = o.metadata?.namespace ?? '';
    const id = `${ns}/${o.metadata?.name}`;
    const touched = new Set<string>();
    const was = this.held.find(([i]) => i === id)?.[1];
    for (const t of was?.targets ?? []) touched.add(t.key);
    this.held = this.held.filter(([i]) => i !== id);
    if (present) {
      const at = `MeshLoadBalancingStrategy ${id}`;
      const h: Held = { ...readLiveStrategy(o.spec, ns, at), at, created: createdAt(o) };
      for (const t of h.targets) touched.add(t.key);
      this.held.push([id, h]);
      this.held.sort(([, a], [, b]) => a.created.localeCompare(b.created));
    }
    return [...touched];
  }
}
