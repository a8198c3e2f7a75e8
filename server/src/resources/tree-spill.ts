/**
 * The load plan of a load-aware service as the compiled tree carries it to
 * node agents: per client node, the leaves its connects go to and their
 * weights (priority 0 of that node's CLA), by index into the compiled tree's
 * nodes. Sorted, so an unchanged plan gives unchanged bytes.
 */
import type { ServiceLoad } from '../domain/load/load-cla.js';
import type { LocalityTree } from '../domain/locality-tree.js';

export interface TreeSpill {
  /** Index of the client node in the compiled tree's nodes (0: the root). */
  readonly node: number;
  /** Indexes of leaves, ascending. */
  readonly leaves: readonly number[];
  /** One per leaf, each > 0. */
  readonly weights: readonly number[];
}

/** O(tree nodes + spill entries); [] without weights. */
export function treeSpills(tree: LocalityTree, load: ServiceLoad | undefined): TreeSpill[] {
  if (!load || load.weights.size === 0) return [];
  // compile() lays nodes out in this same pre-order.
  const index = new Map<number, { at: number; leaf: boolean }>();
  let at = 0;
  for (const n of tree.nodesOf()) index.set(n.id, { at: at++, leaf: n.depth === tree.levels });
  const out: TreeSpill[] = [];
  for (const [nodeId, byLeaf] of load.weights) {
    const node = index.get(nodeId);
    if (!node) continue;
    const targets: [number, number][] = [];
    for (const [leafId, weight] of byLeaf) {
      const leaf = index.get(leafId);
      if (leaf?.leaf && weight > 0) targets.push([leaf.at, Math.round(weight)]);
    }
    if (targets.length === 0) continue;
    targets.sort((a, b) => a[0] - b[0]);
    out.push({ node: node.at, leaves: targets.map((t) => t[0]), weights: targets.map((t) => t[1]) });
  }
  return out.sort((a, b) => a.node - b.node);
}
