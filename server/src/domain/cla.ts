/**
 * The ClusterLoadAssignment model: endpoints grouped by (locality, priority),
 * each group weighted by the sum of its endpoints' weights.
 */
import { localityKey, type Locality } from './locality.js';
import type { LocalityTree, TreeNode } from './locality-tree.js';
import { tierLeaves, type Plan } from './priorities.js';
import type { Endpoint, LoadBalancing } from './service.js';

export interface ClaGroup {
  readonly locality: Locality;
  readonly priority: number;
  /** Sum of the endpoints' weights: gRPC drops a locality without one. */
  readonly weight: number;
  readonly endpoints: readonly Endpoint[];
  /**
   * The same endpoints as whole tree leaves, when every leaf lies in one
   * locality: each run is a leaf's own (immutable) endpoint array, so an
   * encoder can reuse one encoding per leaf until that leaf changes.
   */
  readonly runs?: readonly (readonly Endpoint[])[];
}

/** A tier of a leaf-is-locality tree as a subtree less one child's: one group per leaf, in depth-first order. */
export interface ClaSpan {
  readonly node: TreeNode;
  readonly exclude?: TreeNode;
  readonly priority: number;
}

export interface Cla {
  readonly clusterName: string;
  /** Built on first read when `spans` are given. */
  readonly groups: readonly ClaGroup[];
  readonly overprovisioningFactor: number;
  /**
   * When every leaf is one locality: the CLA as subtree spans, so an encoder
   * can copy whole cached subtrees instead of walking leaves.
   */
  readonly spans?: readonly ClaSpan[];
  /** The tree's levels (with `spans`). */
  readonly levels?: number;
}

export function buildCla(clusterName: string, tree: LocalityTree, lb: LoadBalancing, plan: Plan): Cla {
  // With region, zone and subzone all in the tree, a leaf never spans two localities;
  // with exactly those three levels, a leaf is a locality.
  const leafPerLocality = LOCALITY_SCOPES.every((s) => tree.scopes.includes(s));
  const leafIsLocality = leafPerLocality && tree.levels === LOCALITY_SCOPES.length;
  if (leafIsLocality) {
    const spans: ClaSpan[] = [];
    plan.tiers.forEach((tier, priority) => {
      for (const seg of tier)
        spans.push(seg.exclude ? { node: seg.node, exclude: seg.exclude, priority } : { node: seg.node, priority });
    });
    // The spans follow their nodes' content, so the groups are rebuilt when the tree has changed.
    let groups: { rev: number; groups: ClaGroup[] } | undefined;
    return {
      clusterName,
      overprovisioningFactor: lb.overprovisioningFactor,
      spans,
      levels: tree.levels,
      get groups(): readonly ClaGroup[] {
        if (groups?.rev !== tree.root.rev) groups = { rev: tree.root.rev, groups: leafGroups(tree, plan) };
        return groups.groups;
      },
    };
  }
  const groups: ClaGroup[] = [];
  plan.tiers.forEach((tier, priority) => {
    if (leafIsLocality) {
      // One group per leaf, sharing the leaf's own endpoint array: nothing is copied.
      for (const leaf of tierLeaves(tree, tier)) {
        const g = leafGroup(leaf, priority);
        if (g) groups.push(g);
      }
      return;
    }
    const byLocality = new Map<
      string,
      { locality: Locality; weight: number; endpoints: Endpoint[]; runs: Endpoint[][] }
    >();
    const add = (ep: Endpoint, leaf: TreeNode | undefined): void => {
      const k = localityKey(ep.locality);
      let g = byLocality.get(k);
      if (!g) byLocality.set(k, (g = { locality: ep.locality, weight: 0, endpoints: [], runs: [] }));
      if (leaf) {
        const run = leaf.orderedEndpoints();
        g.runs.push(run as Endpoint[]);
        g.weight += leaf.leafWeight();
        g.endpoints.push(...run);
      } else {
        g.weight += ep.weight;
        g.endpoints.push(ep);
      }
    };
    for (const leaf of tierLeaves(tree, tier)) {
      const eps = leaf.orderedEndpoints();
      const first = eps[0];
      if (!first) continue;
      if (leafPerLocality) add(first, leaf);
      else for (const ep of eps) add(ep, undefined);
    }
    for (const g of byLocality.values()) {
      const { runs, ...rest } = g;
      groups.push(leafPerLocality ? { ...rest, priority, runs } : { ...rest, priority });
    }
  });
  return { clusterName, groups, overprovisioningFactor: lb.overprovisioningFactor };
}

const LOCALITY_SCOPES = ['region', 'zone', 'subzone'] as const;

function leafGroups(tree: LocalityTree, plan: Plan): ClaGroup[] {
  const out: ClaGroup[] = [];
  plan.tiers.forEach((tier, priority) => {
    for (const leaf of tierLeaves(tree, tier)) {
      const g = leafGroup(leaf, priority);
      if (g) out.push(g);
    }
  });
  return out;
}

/** One leaf's group at each priority, kept while the leaf's endpoint array (its version) is the same. */
const leafGroupCache = new WeakMap<readonly Endpoint[], (ClaGroup | undefined)[]>();

export function leafGroup(leaf: TreeNode, priority: number): ClaGroup | undefined {
  const run = leaf.orderedEndpoints();
  const first = run[0];
  if (!first) return undefined;
  let byPriority = leafGroupCache.get(run);
  if (!byPriority) leafGroupCache.set(run, (byPriority = []));
  let g = byPriority[priority];
  if (!g)
    byPriority[priority] = g = {
      locality: first.locality,
      priority,
      weight: leaf.leafWeight(),
      endpoints: run,
      runs: [run],
    };
  return g;
}

/** Endpoint → its priority in a CLA (for tests, previews and debug views). */
export function prioritiesOf(cla: Cla): Map<Endpoint, number> {
  const out = new Map<Endpoint, number>();
  for (const g of cla.groups) for (const e of g.endpoints) out.set(e, g.priority);
  return out;
}
