/**
 * The ClusterLoadAssignment model: endpoints grouped by (locality, priority),
 * each group weighted by the sum of its endpoints' weights.
 */
import { localityKey, type Locality } from './locality.js';
import type { LocalityTree } from './locality-tree.js';
import { tierEndpoints, type Plan } from './priorities.js';
import type { Endpoint, LoadBalancing } from './service.js';

export interface ClaGroup {
  readonly locality: Locality;
  readonly priority: number;
  /** Sum of the endpoints' weights: gRPC drops a locality without one. */
  readonly weight: number;
  readonly endpoints: readonly Endpoint[];
}

export interface Cla {
  readonly clusterName: string;
  readonly groups: readonly ClaGroup[];
  readonly overprovisioningFactor: number;
}

export function buildCla(clusterName: string, tree: LocalityTree, lb: LoadBalancing, plan: Plan): Cla {
  const groups: ClaGroup[] = [];
  plan.tiers.forEach((tier, priority) => {
    const byLocality = new Map<string, { locality: Locality; weight: number; endpoints: Endpoint[] }>();
    for (const ep of tierEndpoints(tree, tier)) {
      const k = localityKey(ep.locality);
      let g = byLocality.get(k);
      if (!g) byLocality.set(k, (g = { locality: ep.locality, weight: 0, endpoints: [] }));
      g.weight += ep.weight;
      g.endpoints.push(ep);
    }
    for (const g of byLocality.values()) groups.push({ ...g, priority });
  });
  return { clusterName, groups, overprovisioningFactor: lb.overprovisioningFactor };
}

/** Endpoint → its priority in a CLA (for tests, previews and debug views). */
export function prioritiesOf(cla: Cla): Map<Endpoint, number> {
  const out = new Map<Endpoint, number>();
  for (const g of cla.groups) for (const e of g.endpoints) out.set(e, g.priority);
  return out;
}
