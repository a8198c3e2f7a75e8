/**
 * Load-aware locality: keep each client node's traffic in its nearest
 * localities until they are full, then spill only the excess to the next
 * nearest (Traffic Director's "waterfall"), or spread a client's share over a
 * wider scope by capacity ("spray").
 *
 * Pure: the inputs are capacities (requests per second a backend locality can
 * take) and offered loads (requests per second a client tree node sends), the
 * output is where each client node's load lands. The controller that feeds it
 * smoothed load reports and damps the weights it produces lives apart
 * (`load-damper.ts`), so this stays a function of its inputs.
 */

import type { TreeNode } from '../locality-tree.js';
import type { SpillMode } from './load-aware-spec.js';

/** A backend locality's capacity in requests per second (0 when drained or empty). */
export interface SpillLocality {
  readonly id: string;
  readonly capacity: number;
}

/**
 * One client tree node: the load its clients offer, and its localities in
 * tiers, best first. Tiers are disjoint; a client whose tiers cover every
 * locality (failover plans do) can always be placed while capacity lasts.
 */
export interface SpillClient {
  readonly id: string;
  readonly offered: number;
  readonly tiers: readonly (readonly string[])[];
}

export interface SpillResult {
  /** client id → locality id → requests per second placed there. */
  readonly placed: ReadonlyMap<string, ReadonlyMap<string, number>>;
  /** client id → load that found no capacity in any of its tiers. */
  readonly unplaced: ReadonlyMap<string, number>;
  /** locality id → the load placed on it by every client. */
  readonly landed: ReadonlyMap<string, number>;
}

/**
 * Fill tier by tier, nearest first, every client node at once. Within a round,
 * each client asks its tier's localities for its remaining load in proportion
 * to their free capacity; a locality asked for more than it has grants each
 * asker the same fraction. Every pass either places a client's whole remainder
 * or fills at least one locality, so a round ends in at most
 * clients + localities passes, with every client either placed or facing a
 * full tier. A client that is placed in round k therefore found every locality
 * of its tiers before k full: no load lands further away while a nearer
 * locality of that client has room.
 */
export function waterfill(localities: readonly SpillLocality[], clients: readonly SpillClient[]): SpillResult {
  const free = new Map<string, number>();
  for (const l of localities) free.set(l.id, Math.max(0, finite(l.capacity)));
  const remaining = new Map<string, number>();
  const placed = new Map<string, Map<string, number>>();
  for (const c of clients) {
    remaining.set(c.id, Math.max(0, finite(c.offered)));
    placed.set(c.id, new Map());
  }
  const rounds = clients.reduce((m, c) => Math.max(m, c.tiers.length), 0);
  for (let k = 0; k < rounds; k++) fillRound(k, clients, free, remaining, placed);

  const landed = new Map<string, number>();
  for (const l of localities) landed.set(l.id, 0);
  for (const byLocality of placed.values()) {
    for (const [id, rps] of byLocality) landed.set(id, (landed.get(id) ?? 0) + rps);
  }
  const unplaced = new Map<string, number>();
  for (const [id, r] of remaining) unplaced.set(id, r);
  return { placed, unplaced, landed };
}

function fillRound(
  k: number,
  clients: readonly SpillClient[],
  free: Map<string, number>,
  remaining: Map<string, number>,
  placed: Map<string, Map<string, number>>,
): void {
  const askers = clients.filter((c) => (c.tiers[k]?.length ?? 0) > 0);
  for (let pass = 0; pass <= askers.length + free.size; pass++) {
    // Each asker's request, spread over its tier's free capacity.
    const asks = new Map<string, Map<string, number>>();
    const asked = new Map<string, number>();
    for (const c of askers) {
      const want = remaining.get(c.id) ?? 0;
      if (want <= 0) continue;
      const tier = c.tiers[k]!;
      let room = 0;
      for (const id of tier) room += free.get(id) ?? 0;
      if (room <= 0) continue;
      const ask = new Map<string, number>();
      for (const id of tier) {
        const f = free.get(id) ?? 0;
        if (f <= 0) continue;
        const a = (want * f) / room;
        ask.set(id, a);
        asked.set(id, (asked.get(id) ?? 0) + a);
      }
      asks.set(c.id, ask);
    }
    if (asks.size === 0) return;
    // A locality asked for more than it has grants everyone the same fraction and is then full.
    const grant = new Map<string, number>();
    for (const [id, a] of asked) grant.set(id, a <= (free.get(id) ?? 0) ? 1 : (free.get(id) ?? 0) / a);
    for (const [cid, ask] of asks) {
      const got = placed.get(cid)!;
      let took = 0;
      for (const [id, a] of ask) {
        const g = a * grant.get(id)!;
        if (g <= 0) continue;
        got.set(id, (got.get(id) ?? 0) + g);
        took += g;
      }
      const left = (remaining.get(cid) ?? 0) - took;
      remaining.set(cid, left > EPSILON * Math.max(1, took) ? left : 0);
    }
    for (const [id, a] of asked) {
      const g = grant.get(id)!;
      // Exactly zero once full, so the next pass skips it without rounding residue.
      free.set(id, g < 1 ? 0 : Math.max(0, (free.get(id) ?? 0) - a));
    }
  }
}

const EPSILON = 1e-9;

function finite(n: number): number {
  return Number.isFinite(n) ? n : 0;
}

/**
 * A client node's placed load as locality weights for priority 0: each
 * locality's share scaled to `scale` in total, at least 1 where anything was
 * placed (a weight of 0 would drop the locality). A client with nothing placed
 * gets its first tier by capacity: with no reports, today's behaviour.
 */
export function spillWeights(
  placed: ReadonlyMap<string, number>,
  firstTier: readonly SpillLocality[],
  scale = 1000,
): Map<string, number> {
  let total = 0;
  for (const v of placed.values()) total += v;
  const source =
    total > 0 ? placed : new Map(firstTier.map((l) => [l.id, l.capacity > 0 ? l.capacity : 1] as [string, number]));
  let sum = 0;
  for (const v of source.values()) sum += v;
  const out = new Map<string, number>();
  if (sum <= 0) return out;
  for (const [id, v] of source) {
    if (v <= 0) continue;
    out.set(id, Math.max(1, Math.round((v / sum) * scale)));
  }
  return out;
}

export type { SpillMode } from './load-aware-spec.js';

/**
 * A client node's tiers of leaf localities, best first, from the locality
 * tree: `node` is the deepest node the client matched (the root when nothing
 * matched). Every leaf of the tree is in exactly one tier.
 */
export function spillTiers<T>(node: TreeNode, levels: number, mode: SpillMode, idOf: (leaf: TreeNode) => T): T[][] {
  let start = node;
  if (mode === 'spray') while (start.depth > 1 && start.parent) start = start.parent;
  const tiers: T[][] = [start.leaves(levels).map(idOf)];
  for (let child = start, up = start.parent; up; child = up, up = up.parent) {
    const below = new Set(child.leaves(levels));
    const rest = up.leaves(levels).filter((l) => !below.has(l));
    if (rest.length > 0) tiers.push(rest.map(idOf));
  }
  return tiers;
}
