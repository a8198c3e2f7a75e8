/**
 * What the planner reads off one tree before placing it: whether it can be
 * loaded at all, its weights, and each node's level and path hash (the key
 * the kernel looks a node up by). Pure.
 */
import type { TreeMessage } from '../resources/tree-codec.js';
import { MAX_DEPTH, pathHash, valueHash } from './abi.js';
import type { mergedTree } from './merged-tree.js';

export function weights(backends: TreeMessage['backends']): { weighted: boolean; totalWeight: number } {
  let weighted = false;
  let totalWeight = 0;
  const first = backends[0]?.weight;
  for (let i = 0; i < backends.length; i++) {
    const w = backends[i]!.weight;
    totalWeight += w;
    if (w !== first) weighted = true;
  }
  return { weighted, totalWeight };
}

/** The first problem of a tree on its own, or undefined. */
export function checkTree(t: TreeMessage): string | undefined {
  if (t.vip === 0 && !t.vip6) return 'vip is 0.0.0.0';
  if (t.port < 1 || t.port > 65535) return `port ${t.port} is not 1..65535`;
  if (t.scopes.length > MAX_DEPTH) return `scopes has ${t.scopes.length} levels, at most ${MAX_DEPTH}`;
  return undefined;
}

/** Each node's level (1-based; the root 0) and path hash (the key the kernel looks it up by). */
export function nodePaths(t: TreeMessage): { level: Int32Array; hash: bigint[] } {
  const level = new Int32Array(t.nodes.length);
  const hash: bigint[] = [0n];
  for (let i = 1; i < t.nodes.length; i++) {
    const node = t.nodes[i]!;
    level[i] = level[node.parent]! + 1;
    hash[i] = pathHash(hash[node.parent]!, valueHash(node.value));
  }
  return { level, hash };
}

/** The same for the merged tree of a network-first service: levels 2.., paths from below the network. */
export function mergedPaths(m: ReturnType<typeof mergedTree>): { level: Int32Array; hash: bigint[] } {
  const level = new Int32Array(m.nodes.length);
  const hash: bigint[] = [];
  m.nodes.forEach((n, j) => {
    level[j] = n.parent < 0 ? 2 : level[n.parent]! + 1;
    hash[j] = pathHash(n.parent < 0 ? 0n : hash[n.parent]!, valueHash(n.value));
  });
  return { level, hash };
}

/** Two nodes of a level whose paths hash alike would be one node in the kernel. */
export function siblingClash(t: TreeMessage): string | undefined {
  const seen = new Map<string, number>();
  const paths = nodePaths(t);
  for (let i = 1; i < t.nodes.length; i++) {
    const key = `${paths.level[i]}/${paths.hash[i]}`;
    const other = seen.get(key);
    if (other !== undefined) {
      return `nodes[${i}] value ${JSON.stringify(t.nodes[i]!.value)} has the path hash of nodes[${other}] ${JSON.stringify(t.nodes[other]!.value)}`;
    }
    seen.set(key, i);
  }
  return undefined;
}
