/**
 * What replicas share of the load their clients report: per replica and per
 * service, the smoothed load offered from each client position (the client's
 * values at the service's scopes, never a client's identity or its raw
 * reports), the load landing on each backend locality, and the replica's plan
 * state by paths. Every replica plans from the sum of the same records, and
 * all follow the eldest replica's plan state, so clients of one tree node get
 * the same weights whichever replica they talk to. Pure.
 */
import type { LocalityTree, TreeNode } from '../locality-tree.js';

/** Load offered from one client position: its values at the service's scopes. */
export interface OfferedAt {
  readonly path: readonly string[];
  readonly rps: number;
}

/** A plan's damping state by paths (node ids are a replica's own). */
export interface SharedPlan {
  readonly nodes: readonly {
    /** The client tree node's path. */
    readonly node: readonly string[];
    /** Leaf path → share of the node's load (summing to 1). */
    readonly shares: readonly { readonly leaf: readonly string[]; readonly share: number }[];
  }[];
  /** Locality paths ("r1/za/s") under auto capacity drain. */
  readonly drained: readonly string[];
}

export interface ServiceAggregate {
  readonly service: string;
  /** The service's scopes the paths below are values at; a replica with other scopes is not summed. */
  readonly scopes: readonly string[];
  /** Sorted by path. */
  readonly offered: readonly OfferedAt[];
  /** Backend locality ("region/zone/subzone") → requests per second landing there. */
  readonly landed: Readonly<Record<string, number>>;
  /** This replica's plan state after the previous period. */
  readonly plan?: SharedPlan;
}

/** One replica's record for one period (a report interval, aligned to the wall clock). */
export interface ReplicaLoad {
  readonly replica: string;
  readonly period: number;
  /** Wall-clock milliseconds when it was taken. */
  readonly at: number;
  readonly intervalMs: number;
  /** The first period this replica published: the eldest replica's plan state is the one every replica follows. */
  readonly since: number;
  readonly services: readonly ServiceAggregate[];
}

/** Where replicas meet (the etcd backend: store/etcd/load-share.ts). */
export interface LoadShare {
  readonly replica: string;
  /** Publishes this replica's record (replacing its previous one). */
  publish(load: ReplicaLoad): Promise<void>;
  /** The latest record of every other live replica. */
  others(): readonly ReplicaLoad[];
  close(): Promise<void>;
}

export const pathKey = (path: readonly string[]): string => path.join('\u0000');

/** One replica's offered load for a service: summed per client position, sorted. */
export function offeredByPath(items: Iterable<OfferedAt>): OfferedAt[] {
  const sums = new Map<string, { path: readonly string[]; rps: number }>();
  for (const o of items) {
    const k = pathKey(o.path);
    const held = sums.get(k);
    if (held) held.rps += o.rps;
    else sums.set(k, { path: [...o.path], rps: o.rps });
  }
  return [...sums.entries()].sort((a, b) => compare(a[0], b[0])).map(([, v]) => v);
}

/** The records a period is planned from: ordered by replica, so every replica sums in the same order. */
export function periodRecords(records: readonly ReplicaLoad[], period: number): ReplicaLoad[] {
  return records
    .filter((r) => r.period === period || r.period === period - 1)
    .sort((a, b) => compare(a.replica, b.replica));
}

/** The eldest replica's record (the smallest `since`, then the smallest id): its plan state is followed. */
export function eldest(records: readonly ReplicaLoad[]): ReplicaLoad | undefined {
  let best: ReplicaLoad | undefined;
  for (const r of records) {
    if (!best || r.since < best.since || (r.since === best.since && compare(r.replica, best.replica) < 0)) best = r;
  }
  return best;
}

/** Offered and landed load of one service, summed over the records that share its scopes. */
export function sumService(
  records: readonly ReplicaLoad[],
  service: string,
  scopes: readonly string[],
): { offered: OfferedAt[]; landed: Map<string, number>; byReplica: { replica: string; offeredRps: number }[] } {
  const offered: OfferedAt[] = [];
  const landed = new Map<string, number>();
  const byReplica: { replica: string; offeredRps: number }[] = [];
  for (const r of records) {
    const agg = r.services.find((s) => s.service === service);
    if (!agg || pathKey(agg.scopes) !== pathKey(scopes)) continue;
    offered.push(...agg.offered);
    byReplica.push({ replica: r.replica, offeredRps: agg.offered.reduce((t, o) => t + o.rps, 0) });
    for (const k of Object.keys(agg.landed).sort()) landed.set(k, (landed.get(k) ?? 0) + agg.landed[k]!);
  }
  return { offered: offeredByPath(offered), landed, byReplica };
}

/** A plan state by paths, to publish. */
export function exportPlan(
  tree: LocalityTree,
  state: {
    readonly shares: ReadonlyMap<number, ReadonlyMap<number, number>>;
    readonly drained: ReadonlySet<string>;
  },
): SharedPlan {
  const byId = new Map<number, TreeNode>();
  for (const n of tree.nodesOf()) byId.set(n.id, n);
  const nodes: { node: string[]; shares: { leaf: string[]; share: number }[] }[] = [];
  for (const [id, shares] of state.shares) {
    const node = byId.get(id);
    if (!node) continue;
    const out: { leaf: string[]; share: number }[] = [];
    for (const [leafId, share] of shares) {
      const leaf = byId.get(leafId);
      if (leaf) out.push({ leaf: leaf.path(), share });
    }
    nodes.push({ node: node.path(), shares: out.sort((a, b) => compare(pathKey(a.leaf), pathKey(b.leaf))) });
  }
  nodes.sort((a, b) => compare(pathKey(a.node), pathKey(b.node)));
  return { nodes, drained: [...state.drained].sort() };
}

/**
 * Another replica's plan state in this replica's node ids: nodes and leaves
 * this tree does not hold (yet) are left out, as a node first seen would be.
 */
export function importPlan(
  tree: LocalityTree,
  plan: SharedPlan,
): { shares: Map<number, Map<number, number>>; drained: Set<string> } {
  const shares = new Map<number, Map<number, number>>();
  for (const n of plan.nodes) {
    const node = exactNode(tree, n.node);
    if (!node) continue;
    const m = new Map<number, number>();
    for (const s of n.shares) {
      const leaf = exactNode(tree, s.leaf);
      if (leaf && leaf.depth === tree.levels) m.set(leaf.id, s.share);
    }
    if (m.size > 0) shares.set(node.id, m);
  }
  return { shares, drained: new Set(plan.drained) };
}

function exactNode(tree: LocalityTree, path: readonly string[]): TreeNode | undefined {
  const node = tree.match(path);
  return node.depth === path.length ? node : undefined;
}

/** Code-unit order, the same on every replica (localeCompare is not). */
function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
