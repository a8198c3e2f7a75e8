/**
 * The merged tree of a network-first service: the same backends grouped by
 * the levels below the network, every network together. A caller whose
 * network has no backends walks it, and the deepest node it reaches holds
 * exactly the endpoints at priority 0 of its CLA (the foreign networks'
 * best matches at the deepest depth any of them reaches). Pure.
 */
import type { TreeMessage } from '../resources/tree-codec.js';

export interface MergedNode {
  /** Parent's index in `nodes`, or -1 for a first-level node (under the merged root). */
  readonly parent: number;
  readonly value: string;
  /** Range into `order`. */
  readonly start: number;
  readonly end: number;
}

export interface MergedTree {
  /** order[i]: the backend (index into tree.backends) at position i of the merged layout. */
  readonly order: readonly number[];
  readonly nodes: readonly MergedNode[];
}

/** Builds the merged tree; the caller has checked that nodes form a tree (parents first). */
export function mergedTree(t: TreeMessage): MergedTree {
  const levels = t.scopes.length;
  const depth = new Array<number>(t.nodes.length).fill(0);
  const paths: string[][] = [[]];
  const leaves: { path: string[]; start: number; end: number }[] = [];
  for (let i = 1; i < t.nodes.length; i++) {
    const n = t.nodes[i]!;
    depth[i] = depth[n.parent]! + 1;
    paths[i] = [...paths[n.parent]!, n.value];
    if (depth[i] === levels && n.end > n.start) leaves.push({ path: paths[i]!, start: n.start, end: n.end });
  }
  // Sort by the levels below the network; the network breaks ties so the layout depends on content only.
  const rest = (l: { path: string[] }) => [...l.path.slice(1), l.path[0]!];
  leaves.sort((a, b) => compareList(rest(a), rest(b)));

  const order: number[] = [];
  const nodes: { parent: number; value: string; start: number; end: number }[] = [];
  // open[d]: index of the open merged node at merged depth d (level d + 1 of the tree).
  const open: number[] = [];
  let prev: string[] = [];
  for (const leaf of leaves) {
    const key = leaf.path.slice(1);
    let common = 0;
    while (common < key.length && common < prev.length && key[common] === prev[common]) common++;
    for (let d = open.length - 1; d >= common; d--) nodes[open[d]!]!.end = order.length;
    open.length = common;
    for (let d = common; d < key.length; d++) {
      nodes.push({ parent: d === 0 ? -1 : open[d - 1]!, value: key[d]!, start: order.length, end: order.length });
      open.push(nodes.length - 1);
    }
    for (let b = leaf.start; b < leaf.end; b++) order.push(b);
    prev = key;
  }
  for (const i of open) nodes[i]!.end = order.length;
  return { order, nodes };
}

function compareList(a: readonly string[], b: readonly string[]): number {
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    if (a[i] !== b[i]) return a[i]! < b[i]! ? -1 : 1;
  }
  return a.length - b.length;
}
