/**
 * Where each backend of one tree version sits: every node by id (its level
 * and path hash, the key the kernel looks it up by), its parent, and which
 * backends its bucket holds; each backend's key and the node that owns it
 * directly. The merged tree of a network-first service adds its own nodes.
 * Pure.
 */
import type { TreeMessage } from '../resources/tree-codec.js';
import { ALT_LEVEL } from './abi.js';
import { mergedTree } from './merged-tree.js';
import { mergedPaths, nodePaths } from './tree-shape.js';

export interface PlacedNode {
  /** `${level}:${path hash}` (level | ALT_LEVEL in the merged tree). */
  readonly id: string;
  readonly level: number;
  readonly hash: bigint;
  /** '' under the root. */
  readonly parent: string;
  /** Index in the tree message (merged nodes: after the tree's own). */
  readonly index: number;
  /** The backends of its subtree: tree.backends[start, end), or order[start, end) of the merged tree. */
  readonly start: number;
  readonly end: number;
  readonly order?: readonly number[];
}

export interface Placement {
  readonly nodes: readonly PlacedNode[];
  /** Per backend: the node that owns it directly in the tree, and in the merged tree ('' none), joined by '|'. */
  readonly owner: readonly string[];
}

export function isNetworkFirst(t: TreeMessage): boolean {
  return t.networkFirst && t.mode === 'failover' && t.scopes[0] === 'network' && t.scopes.length > 1;
}

export function place(t: TreeMessage): Placement {
  const nodes: PlacedNode[] = [];
  const paths = nodePaths(t);
  const ids: string[] = [''];
  const n = t.backends.length;
  const realOwner = new Int32Array(n);
  for (let i = 1; i < t.nodes.length; i++) {
    const node = t.nodes[i]!;
    const id = `${paths.level[i]}:${paths.hash[i]}`;
    ids[i] = id;
    realOwner.fill(i, node.start, node.end);
    nodes.push({
      id,
      level: paths.level[i]!,
      hash: paths.hash[i]!,
      parent: ids[node.parent]!,
      index: i,
      start: node.start,
      end: node.end,
    });
  }
  const mergedOwner = new Int32Array(n).fill(-1);
  const mids: string[] = [];
  if (isNetworkFirst(t)) {
    const m = mergedTree(t);
    const mp = mergedPaths(m);
    m.nodes.forEach((node, j) => {
      const level = (ALT_LEVEL | mp.level[j]!) >>> 0;
      const id = `${level}:${mp.hash[j]}`;
      mids[j] = id;
      for (let i = node.start; i < node.end; i++) mergedOwner[m.order[i]!] = j;
      nodes.push({
        id,
        level,
        hash: mp.hash[j]!,
        parent: node.parent < 0 ? '' : mids[node.parent]!,
        index: t.nodes.length + j,
        start: node.start,
        end: node.end,
        order: m.order,
      });
    });
  }
  // One string per (node, merged node) pair, shared by its backends.
  const owner: string[] = new Array<string>(n);
  const names = new Map<number, string>();
  for (let b = 0; b < n; b++) {
    const mo = mergedOwner[b]!;
    const code = realOwner[b]! * 0x100000 + mo + 1;
    let name = names.get(code);
    if (name === undefined) names.set(code, (name = `${ids[realOwner[b]!]}|${mo < 0 ? '' : mids[mo]}`));
    owner[b] = name;
  }
  return { nodes, owner };
}

/** The backends of a node's subtree (indexes into tree.backends). */
export function membersOf(p: PlacedNode): ArrayLike<number> {
  if (p.order) return p.order.slice(p.start, p.end);
  const r = new Int32Array(p.end - p.start);
  for (let i = 0; i < r.length; i++) r[i] = p.start + i;
  return r;
}
