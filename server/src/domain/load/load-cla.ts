/**
 * A load-aware client node's ClusterLoadAssignment: the localities its load
 * is placed on form priority 0, each weighted by its share of that load; the
 * rest keep the failover tiers as later priorities, so health failover works
 * as it does without load awareness. One group per locality per priority.
 */
import type { Cla, ClaGroup } from '../cla.js';
import { localityKey } from '../locality.js';
import type { LocalityTree, TreeNode } from '../locality-tree.js';
import { spillTiers } from './load-spill.js';
import type { Endpoint, LoadBalancing } from '../service.js';

/** The weights a service's client nodes get this interval, from the load controller. */
export interface ServiceLoad {
  /** Changes whenever any node's weights change: part of the CLA cache key. */
  readonly epoch: number;
  /** Matched tree node id → leaf node id → locality weight in priority 0. Nodes absent get the plain CLA. */
  readonly weights: ReadonlyMap<number, ReadonlyMap<number, number>>;
}

export function buildLoadCla(
  clusterName: string,
  tree: LocalityTree,
  lb: LoadBalancing,
  node: TreeNode,
  weights: ReadonlyMap<number, number>,
): Cla {
  const tiers = spillTiers(node, tree.levels, 'waterfall', (l) => l);
  const groups: ClaGroup[] = [];
  const first = new Map<string, { group: MutableGroup }>();
  const add = (into: Map<string, { group: MutableGroup }>, leaf: TreeNode, priority: number, weight: number): void => {
    const run = leaf.orderedEndpoints();
    const head = run[0];
    if (!head) return;
    const k = localityKey(head.locality);
    const held = into.get(k);
    if (held) {
      held.group.weight += weight;
      held.group.endpoints.push(...run);
      held.group.runs.push(run);
      return;
    }
    const group: MutableGroup = { locality: head.locality, priority, weight, endpoints: [...run], runs: [run] };
    into.set(k, { group });
    groups.push(group);
  };
  for (const tier of tiers)
    for (const leaf of tier) if ((weights.get(leaf.id) ?? 0) > 0) add(first, leaf, 0, weights.get(leaf.id)!);
  const placedAny = first.size > 0;
  let priority = placedAny ? 1 : 0;
  const unweighted: TreeNode[] = [];
  tiers.forEach((tier, k) => {
    const byLocality = new Map<string, { group: MutableGroup }>();
    for (const leaf of tier) {
      if ((weights.get(leaf.id) ?? 0) > 0) continue;
      // A drained first-tier locality goes last: it takes traffic only when nothing else can.
      if (k === 0 && placedAny) unweighted.push(leaf);
      else add(byLocality, leaf, priority, leaf.leafWeight());
    }
    if (byLocality.size > 0) priority++;
  });
  if (unweighted.length > 0) {
    const byLocality = new Map<string, { group: MutableGroup }>();
    for (const leaf of unweighted) add(byLocality, leaf, priority, leaf.leafWeight());
  }
  return { clusterName, groups, overprovisioningFactor: lb.overprovisioningFactor };
}

interface MutableGroup {
  readonly locality: ClaGroup['locality'];
  readonly priority: number;
  weight: number;
  readonly endpoints: Endpoint[];
  readonly runs: (readonly Endpoint[])[];
}
