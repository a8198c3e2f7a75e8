/**
 * Priorities from the tree: which endpoints a client gets at which priority,
 * for each load-balancing mode. A client's plan depends only on the tree
 * nodes its path reaches, so `key` names it for the CLA cache.
 */
import { pathOf, type Placement } from './locality.js';
import type { LocalityTree, TreeNode } from './locality-tree.js';
import type { Endpoint, LoadBalancing } from './service.js';

/** A subtree, less one of its children's subtrees. */
export interface Segment {
  readonly node: TreeNode;
  readonly exclude?: TreeNode;
}

/** Endpoints of equal rank: a list of disjoint segments. */
export type Tier = readonly Segment[];

export interface Plan {
  /** Equal for two clients exactly when their tiers are equal. */
  readonly key: string;
  /** Best first. Empty tiers are already left out, so tier i is priority i. */
  readonly tiers: readonly Tier[];
}

export function planFor(tree: LocalityTree, lb: LoadBalancing, client: Placement): Plan {
  if (tree.size === 0) return { key: 'empty', tiers: [] };
  const path = pathOf(tree.scopes, client);
  switch (lb.mode) {
    case 'random':
      return { key: 'random', tiers: [[{ node: tree.root }]] };
    case 'strict': {
      const m = tree.match(path);
      return m.depth === tree.levels ? { key: `s${m.id}`, tiers: [[{ node: m }]] } : { key: 'none', tiers: [] };
    }
    case 'failover': {
      const plan =
        tree.scopes[0] === 'network' && lb.crossNetworkFailover && tree.levels > 1
          ? networkFirstPlan(tree, path)
          : failoverPlan(tree, path);
      return lb.reach ? withinReach(plan, lb.reach.minEndpoints) : plan;
    }
  }
}

/**
 * The plan's key alone, without building its tiers: what a cache hit costs.
 * Equal to `planFor(...).key`.
 */
export function planKeyFor(tree: LocalityTree, lb: LoadBalancing, client: Placement): string {
  if (tree.size === 0) return 'empty';
  switch (lb.mode) {
    case 'random':
      return 'random';
    case 'strict': {
      const m = tree.matchPlacement(client);
      return m.depth === tree.levels ? `s${m.id}` : 'none';
    }
    case 'failover': {
      if (tree.scopes[0] === 'network' && lb.crossNetworkFailover && tree.levels > 1)
        return planFor(tree, lb, client).key;
      const m = tree.matchPlacement(client);
      return lb.reach ? `f${m.id}${reachSuffix(m, lb.reach.minEndpoints)}` : `f${m.id}`;
    }
  }
}

/**
 * `reach`: the tiers, best first and whole, until they hold `min` endpoints.
 * How many that is depends on the tree's counts, not only its shape, so the
 * key names the tiers kept: an entry whose spans follow the tree stays right
 * while its key does, and a count change that needs another tier is a new key.
 */
function withinReach(plan: Plan, min: number): Plan {
  let held = 0;
  for (let i = 0; i < plan.tiers.length - 1; i++) {
    held += tierCount(plan.tiers[i]!);
    if (held >= min) return { key: `${plan.key}~${i + 1}`, tiers: plan.tiers.slice(0, i + 1) };
  }
  return plan;
}

/** withinReach's key suffix for failoverPlan, from the counts alone (a cache hit builds no tiers). */
function reachSuffix(m: TreeNode, min: number): string {
  let held = 0;
  let kept = 0;
  let prev: TreeNode | undefined;
  for (let n: TreeNode | undefined = m; n; n = n.parent) {
    const own = n.count - (prev?.count ?? 0);
    if (own > 0) {
      // A tier past the one that reached `min`: the plan is cut after `kept` tiers.
      if (held >= min) return `~${kept}`;
      held += own;
      kept++;
    }
    prev = n;
  }
  return '';
}

function tierCount(tier: Tier): number {
  let n = 0;
  for (const seg of tier) n += seg.node.count - (seg.exclude?.count ?? 0);
  return n;
}

/** Priority = levels not matched; empty tiers compacted away. */
function failoverPlan(tree: LocalityTree, path: readonly string[]): Plan {
  const m = tree.match(path);
  return { key: `f${m.id}`, tiers: ancestorTiers(m, 0) };
}

/**
 * Tiers from `m` up to its ancestor at depth `top`: each ancestor's subtree
 * less the child already taken. Empty tiers are skipped.
 */
function ancestorTiers(m: TreeNode, top: number): Tier[] {
  const tiers: Tier[] = [];
  let prev: TreeNode | undefined;
  for (let n: TreeNode | undefined = m; n && n.depth >= top; n = n.parent) {
    if (n.count > (prev?.count ?? 0)) tiers.push([prev ? { node: n, exclude: prev } : { node: n }]);
    prev = n;
  }
  return tiers;
}

/**
 * Network first (Istio, ztunnel): the client's own network ranks by the
 * remaining levels; then every other network, ranked by the same remaining
 * levels as one group per match depth, below all of the client's network.
 */
function networkFirstPlan(tree: LocalityTree, path: readonly string[]): Plan {
  const own = tree.root.children.get(path[0] ?? '');
  const rest = path.slice(1);
  const tiers: Tier[] = [];
  let key = 'n';
  if (own) {
    const m = descend(own, rest);
    key += m.id;
    tiers.push(...ancestorTiers(m, 1));
  }
  key += '|';
  // byDepth[d]: the segments of foreign networks whose best match is at depth d.
  const byDepth: Segment[][] = [];
  for (const net of tree.root.orderedChildren()) {
    if (net === own) continue;
    const m = descend(net, rest);
    key += `${m.id},`;
    let prev: TreeNode | undefined;
    for (let n: TreeNode | undefined = m; n && n.depth >= 1; n = n.parent) {
      if (n.count > (prev?.count ?? 0)) (byDepth[n.depth] ??= []).push(prev ? { node: n, exclude: prev } : { node: n });
      prev = n;
    }
  }
  for (let d = tree.levels; d >= 1; d--) {
    const segs = byDepth[d];
    if (segs) tiers.push(segs);
  }
  return { key, tiers };
}

function descend(from: TreeNode, path: readonly string[]): TreeNode {
  let node = from;
  for (const value of path) {
    const child = node.children.get(value);
    if (!child) break;
    node = child;
  }
  return node;
}

/** The leaves of a tier, depth-first (slices of cached per-node leaf lists). */
export function tierLeaves(tree: LocalityTree, tier: Tier): readonly TreeNode[] {
  if (tier.length === 1 && !tier[0]!.exclude) return tier[0]!.node.leaves(tree.levels);
  const out: TreeNode[] = [];
  for (const seg of tier) {
    const all = seg.node.leaves(tree.levels);
    if (!seg.exclude) {
      for (const l of all) out.push(l);
      continue;
    }
    // The excluded child's leaves are one contiguous run of its parent's.
    const skip = seg.exclude.leaves(tree.levels);
    const from = skip.length ? all.indexOf(skip[0]!) : -1;
    for (let i = 0; i < all.length; i++) if (from < 0 || i < from || i >= from + skip.length) out.push(all[i]!);
  }
  return out;
}

/** The endpoints of a tier, depth-first. */
export function tierEndpoints(tree: LocalityTree, tier: Tier): Endpoint[] {
  return tierLeaves(tree, tier).flatMap((leaf) => leaf.orderedEndpoints());
}
