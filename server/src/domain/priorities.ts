/**
 * Priorities from the tree: which endpoints a client gets at which priority,
 * for each load-balancing mode. A client's plan depends only on the tree
 * nodes its path reaches (`matchPlan` walks to them once), so `planKey`
 * names it for the CLA cache and `planOf` builds it, both from that match.
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

/**
 * What a client's plan depends on, found by one walk of the tree: the key
 * (`planKey`, what a cache hit costs) and the tiers (`planOf`, on a miss)
 * are both made from it, so they cannot come from two different matches.
 */
export interface PlanMatch {
  readonly tree: LocalityTree;
  readonly lb: LoadBalancing;
  /** The deepest node on the client's path (the root when even the first level differs; random mode reads none). */
  readonly node: TreeNode;
  /** Network first: every other network's deepest node on the client's path below the network, in tree order. */
  readonly foreign?: readonly TreeNode[];
}

/** `node`: the client's match when the caller already walked the tree (a policy reads it too). */
export function matchPlan(tree: LocalityTree, lb: LoadBalancing, client: Placement, node?: TreeNode): PlanMatch {
  if (tree.size === 0 || lb.mode === 'random') return { tree, lb, node: node ?? tree.root };
  const at = node ?? tree.matchPlacement(client);
  if (!networkFirst(tree, lb)) return { tree, lb, node: at };
  const rest = pathOf(tree.scopes, client).slice(1);
  const own = at.depth >= 1 ? ancestorAt(at, 1) : undefined;
  const foreign: TreeNode[] = [];
  for (const net of tree.root.orderedChildren()) if (net !== own) foreign.push(descend(net, rest));
  return { tree, lb, node: at, foreign };
}

/**
 * The plan's key alone, without building its tiers: what a cache hit costs.
 * Equal to `planOf(m).key`.
 */
export function planKey(m: PlanMatch): string {
  const { tree, lb, node } = m;
  if (tree.size === 0) return 'empty';
  switch (lb.mode) {
    case 'random':
      return 'random';
    case 'strict':
      return node.depth === tree.levels ? `s${node.id}` : 'none';
    case 'failover': {
      if (m.foreign) {
        // The cut under `reach` depends on the foreign tiers, which only the plan has.
        return lb.reach ? planOf(m).key : networkFirstKey(node, m.foreign);
      }
      return lb.reach ? `f${node.id}${reachSuffix(node, lb.reach.minEndpoints)}` : `f${node.id}`;
    }
  }
}

/** The client's tiers, from the match its key was made from. */
export function planOf(m: PlanMatch): Plan {
  const { tree, lb, node } = m;
  if (tree.size === 0) return { key: 'empty', tiers: [] };
  switch (lb.mode) {
    case 'random':
      return { key: 'random', tiers: [[{ node: tree.root }]] };
    case 'strict':
      return node.depth === tree.levels ? { key: `s${node.id}`, tiers: [[{ node }]] } : { key: 'none', tiers: [] };
    case 'failover': {
      const plan = m.foreign ? networkFirstPlan(tree, node, m.foreign) : failoverPlan(node);
      return lb.reach ? withinReach(plan, lb.reach.minEndpoints) : plan;
    }
  }
}

/** One match, then the plan (for callers that need the tiers and no cache key). */
export function planFor(tree: LocalityTree, lb: LoadBalancing, client: Placement): Plan {
  return planOf(matchPlan(tree, lb, client));
}

function networkFirst(tree: LocalityTree, lb: LoadBalancing): boolean {
  return lb.mode === 'failover' && tree.scopes[0] === 'network' && lb.crossNetworkFailover && tree.levels > 1;
}

/** The node's ancestor at `depth` (itself when it is no deeper). */
export function ancestorAt(node: TreeNode, depth: number): TreeNode {
  let n = node;
  while (n.depth > depth && n.parent) n = n.parent;
  return n;
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
function failoverPlan(m: TreeNode): Plan {
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
function networkFirstPlan(tree: LocalityTree, node: TreeNode, foreign: readonly TreeNode[]): Plan {
  const tiers: Tier[] = node.depth >= 1 ? ancestorTiers(node, 1) : [];
  // byDepth[d]: the segments of foreign networks whose best match is at depth d.
  const byDepth: Segment[][] = [];
  for (const m of foreign) {
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
  return { key: networkFirstKey(node, foreign), tiers };
}

/** The nodes a network-first plan is made of: the client's own network's match, then each other's. */
function networkFirstKey(node: TreeNode, foreign: readonly TreeNode[]): string {
  let key = node.depth >= 1 ? `n${node.id}|` : 'n|';
  for (const m of foreign) key += `${m.id},`;
  return key;
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
