/**
 * Plans how a set of locality trees becomes BPF map operations, without
 * touching the kernel. Pure: the Datapath executes the plan.
 *
 * For every service whose tree changed:
 * 1. fill: a fresh endpoint range and a fresh tree id, written in batches;
 * 2. publish: one write of the service entry, which switches connect() from
 *    the old tree to the new one in a single step;
 * 3. retire: the old range and node entries, freed one grace period later,
 *    once no connect() that read the old service entry can still be using them.
 * A removed service is unpublished (one delete) and retired the same way.
 *
 * A service the kernel cannot load (bad field, no room) is rejected on its
 * own: the others are still planned, and the rejected one keeps what it had.
 * Every capacity is checked here, so executing a plan fails only on a kernel
 * error, and then the Datapath rolls it back.
 */
import type { TreeMessage } from '../resources/tree-codec.js';
import {
  ALT_LEVEL,
  LAYOUT,
  MAX_SCOPES,
  MODE,
  SCOPE_FIRST_DYNAMIC,
  SCOPE_REGION,
  SCOPE_SUBZONE,
  SCOPE_ZONE,
  SVC_WEIGHTED,
  svcKey,
  svcValue,
  writeBackend,
  writeNode,
  writeNodeKey,
  writeSlot,
  type SvcKey,
} from './abi.js';
import { spillFlag } from './spill-plan.js';
import { fullLayout, inPlace, keyIp, keyPort, type Layout } from './in-place.js';
import { mergedTree } from './merged-tree.js';
import { checkTree, mergedPaths, nodePaths, siblingClash, weights } from './tree-shape.js';
import type { Range, SlotAllocator } from './slot-allocator.js';

export const FIXED_SCOPES: ReadonlyMap<string, number> = new Map([
  ['region', SCOPE_REGION],
  ['zone', SCOPE_ZONE],
  ['subzone', SCOPE_SUBZONE],
]);

/** One service as it is in the maps. */
export interface Published {
  readonly name: string;
  readonly key: SvcKey;
  readonly tree: number;
  readonly range: Range;
  /** Live endpoints (backends of its tree; after a restart, the recovered tree's endpoint count until its next version). */
  readonly endpoints: number;
  /** Its canopy_services value (to restore it when a later apply is rolled back). */
  readonly value: Buffer;
  /** Scope slot of each tree level (what keeps a dynamic slot in use). */
  readonly slots: readonly number[];
  /** Its node keys, concatenated (for the batch delete when it is retired). */
  readonly nodeKeys: Buffer;
  readonly nodeCount: number;
  /** Content hash of the tree it was loaded from ('' after a restart: unknown). */
  readonly hash: string;
  /** Its slots, for a later version written in place (unweighted, not network-first; unknown after a restart). */
  readonly layout?: Layout;
}

export interface Limits {
  readonly services: number;
  readonly nodes: number;
}

export interface AgentState {
  /** by `vip:port` */
  readonly services: Map<string, Published>;
  allocator: SlotAllocator;
  nextTree: number;
  /** scope name → slot */
  readonly scopes: Map<string, number>;
  /** canopy_nodes entries held by live and retiring trees. */
  nodesHeld: number;
  readonly limits: Limits;
}

export interface IncomingTree {
  readonly tree: TreeMessage;
  /** Content hash of the resource; equal hash, nothing to do. */
  readonly hash: string;
}

export interface Fill {
  readonly service: string;
  readonly endpoints: { readonly keys: Buffer; readonly values: Buffer; readonly count: number };
  readonly nodes: { readonly keys: Buffer; readonly values: Buffer; readonly count: number };
}

/** An unchanged-shape version written into the service's own slots (in-place.ts). */
export interface Patch {
  readonly service: string;
  readonly keys: Buffer;
  readonly values: Buffer;
  /** What those slots held, for a rollback. */
  readonly previous: Buffer;
  readonly count: number;
}

export interface Rejected {
  readonly service: string;
  readonly detail: string;
  /** Rejected for want of map room: it may fit once retiring trees are freed. */
  readonly capacity?: boolean;
}

export interface Plan {
  /** New scope slots (canopy_scopes) — workload entries must be rewritten before anything is published. */
  readonly newScopes: readonly { readonly scope: string; readonly slot: number }[];
  readonly fills: readonly Fill[];
  /** In-place versions: endpoint slot writes only, no switch needed (each connect reads one slot). */
  readonly patches: readonly Patch[];
  /** `previous`: the value it replaces, if any (for a rollback). */
  readonly publish: readonly {
    readonly service: string;
    readonly key: Buffer;
    readonly value: Buffer;
    readonly previous?: Buffer;
  }[];
  readonly unpublish: readonly { readonly service: string; readonly key: Buffer; readonly previous: Buffer }[];
  /** Freed after the grace period. */
  readonly retire: readonly Published[];
  /** Services left out of this plan, each with why; they keep what they had. */
  readonly rejected: readonly Rejected[];
  /** The state once the plan has been executed. */
  readonly next: AgentState;
  /** Services left as they were. */
  readonly unchanged: number;
}

export function keyString(k: SvcKey): string {
  return k.vip6 ? `[${Buffer.from(k.vip6).toString('hex')}]:${k.port}` : `${k.vip}:${k.port}`;
}

/**
 * Plans the move from `state` to `trees` (full state: a service not in
 * `trees` is removed, unless its name is in `keep` — a resource that could
 * not even be decoded). A tree that cannot be loaded is rejected with the
 * field at fault and its service keeps its last good state. `state` is never
 * modified.
 */
export function plan(state: AgentState, trees: readonly IncomingTree[], keep: ReadonlySet<string> = new Set()): Plan {
  const rejected: Rejected[] = [];
  const reject = (t: TreeMessage, detail: string, capacity = false) =>
    rejected.push({ service: t.service, detail: `service ${t.service}: ${detail}`, ...(capacity ? { capacity } : {}) });

  // 1. What each tree asks for, checked on its own.
  const accepted: IncomingTree[] = [];
  const claimed = new Map<string, string>();
  // A service already holding a vip:port goes first, so it keeps it against a newcomer.
  const holds = (it: IncomingTree) => (state.services.get(keyString(it.tree))?.name === it.tree.service ? 1 : 0);
  for (const it of [...trees].sort((a, b) => holds(b) - holds(a))) {
    const bad = checkTree(it.tree);
    if (bad !== undefined) {
      reject(it.tree, bad);
      continue;
    }
    const ks = keyString(it.tree);
    const other = claimed.get(ks);
    if (other !== undefined) {
      reject(it.tree, `vip:port is also used by service ${other}`);
      continue;
    }
    claimed.set(ks, it.tree.service);
    accepted.push(it);
  }
  // 2. Removals: held services no tree claims, unless rejected or kept.
  const keepNames = new Set([...keep, ...rejected.map((r) => r.service)]);
  const services = new Map(state.services);
  const unpublish: { service: string; key: Buffer; previous: Buffer }[] = [];
  const retire: Published[] = [];
  for (const [ks, held] of state.services) {
    if (claimed.has(ks) || keepNames.has(held.name)) continue;
    unpublish.push({ service: held.name, key: svcKey(held.key), previous: held.value });
    retire.push(held);
    services.delete(ks);
  }

  // 3. Each accepted tree: scope slots, room, then its fill.
  const allocator = state.allocator.clone();
  const scopes = new Map(state.scopes);
  const newScopes: { scope: string; slot: number }[] = [];
  let nextTree = state.nextTree;
  let nodesHeld = state.nodesHeld;
  const fills: Fill[] = [];
  const patches: Patch[] = [];
  const publish: { service: string; key: Buffer; value: Buffer; previous?: Buffer }[] = [];
  let unchanged = 0;

  for (const { tree: t, hash } of accepted) {
    const ks = keyString(t);
    const held = services.get(ks);
    const slots = scopeSlots(t.scopes, scopes, services);
    if (typeof slots === 'string') {
      reject(t, slots);
      continue;
    }
    if (held && held.hash === hash && held.name === t.service) {
      unchanged++;
      continue;
    }
    const { weighted, totalWeight } = weights(t.backends);
    if (totalWeight > 0xffffffff) {
      reject(t, `endpoint weights add up to ${totalWeight}, more than 2^32 - 1`);
      continue;
    }
    const spill = spillFlag(t, held?.value); // a change of load awareness takes the full path
    if (held?.layout && !weighted && spill.same && held.name === t.service && sameSlots(held.slots, slots.levels)) {
      const r = inPlace(held.layout, t);
      if (typeof r !== 'string') {
        patches.push(patchOf(t.service, held.range.start, r.writes));
        services.set(ks, { ...held, hash, layout: r.layout, endpoints: t.backends.length });
        continue;
      }
    }
    // (An in-place version has the node values its full write was checked with.)
    const clash = siblingClash(t);
    if (clash !== undefined) {
      reject(t, clash);
      continue;
    }
    if (!held && services.size >= state.limits.services) {
      reject(t, `service map full: ${state.limits.services} services at most (--max-services)`);
      continue;
    }
    const networkFirst = t.networkFirst && t.mode === 'failover' && t.scopes[0] === 'network' && t.scopes.length > 1;
    const merged = networkFirst ? mergedTree(t) : undefined;
    const n = t.backends.length;
    const nodeCount = t.nodes.length - 1 + (merged?.nodes.length ?? 0);
    if (nodesHeld + nodeCount > state.limits.nodes) {
      reject(
        t,
        `node map full: ${nodeCount} entries needed, ${state.limits.nodes - nodesHeld} free of ${state.limits.nodes} (--max-nodes; retired trees hold theirs for one grace period)`,
        true,
      );
      continue;
    }
    const slotsNeeded = n + (merged?.order.length ?? 0);
    const range = allocator.allocate(slotsNeeded);
    if (!range) {
      reject(
        t,
        `endpoint map full: ${slotsNeeded} slots needed, ${allocator.capacity - allocator.inUse} free of ${allocator.capacity} (--max-endpoints; retired trees hold theirs for one grace period)`,
        true,
      );
      continue;
    }
    for (const [scope, slot] of slots.added) {
      scopes.set(scope, slot);
      newScopes.push({ scope, slot });
    }
    nodesHeld += nodeCount;
    const treeId = nextTree++;
    if (nextTree > 0xffffffff) nextTree = 1;

    const epKeys = Buffer.alloc(slotsNeeded * 4);
    const epValues = Buffer.alloc(slotsNeeded * LAYOUT.canopy_backend.size);
    const order = merged ? [...t.backends.keys(), ...merged.order] : [...t.backends.keys()];
    let cum = 0;
    order.forEach((b, i) => {
      const be = t.backends[b]!;
      if (i === n) cum = 0; // the merged layout counts its own weights
      cum += be.weight;
      writeSlot(epKeys, i * 4, range.start + i);
      writeBackend(epValues, i * LAYOUT.canopy_backend.size, be.ipv4, be.port, weighted ? cum : 0, be.ipv6);
    });

    const nodeKeys = Buffer.alloc(nodeCount * LAYOUT.canopy_node_key.size);
    const nodeValues = Buffer.alloc(nodeCount * LAYOUT.canopy_node.size);
    const put = (i: number, level: number, path: bigint, id: number, start: number, count: number) => {
      writeNodeKey(nodeKeys, i * LAYOUT.canopy_node_key.size, { tree: treeId, level, value: path });
      writeNode(nodeValues, i * LAYOUT.canopy_node.size, { id, start, count });
    };
    const paths = nodePaths(t);
    for (let i = 1; i < t.nodes.length; i++) {
      const node = t.nodes[i]!;
      put(i - 1, paths.level[i]!, paths.hash[i]!, i, node.start, node.end - node.start);
    }
    // Merged nodes: keyed in the merged tree's level space, paths from below the network; ranges after its n backends.
    if (merged) {
      const mp = mergedPaths(merged);
      merged.nodes.forEach((m, j) => {
        put(
          t.nodes.length - 1 + j,
          ALT_LEVEL | mp.level[j]!,
          mp.hash[j]!,
          t.nodes.length + j,
          m.start,
          m.end - m.start,
        );
      });
    }

    const value = svcValue({
      tree: treeId,
      epBase: range.start,
      epCount: n,
      mode: networkFirst ? MODE.networkFirst : MODE[t.mode],
      depth: t.scopes.length,
      levelScope: slots.levels,
      altBase: merged ? range.start + n : 0,
      flags: (weighted ? SVC_WEIGHTED : 0) | spill.flag,
    });
    fills.push({
      service: t.service,
      endpoints: { keys: epKeys, values: epValues, count: slotsNeeded },
      nodes: { keys: nodeKeys, values: nodeValues, count: nodeCount },
    });
    publish.push({ service: t.service, key: svcKey(t), value, ...(held ? { previous: held.value } : {}) });
    if (held) retire.push(held);
    const layout = !weighted && !merged && !t.vip6 ? fullLayout(t) : undefined;
    services.set(ks, {
      endpoints: n,
      name: t.service,
      key: { vip: t.vip, port: t.port, ...(t.vip6 ? { vip6: t.vip6 } : {}) },
      tree: treeId,
      range,
      value,
      slots: slots.levels,
      nodeKeys,
      nodeCount,
      hash,
      ...(layout ? { layout } : {}),
    });
  }

  // 4. A dynamic scope no service uses any more gives its slot back.
  const inUse = new Set([...services.values()].flatMap((s) => s.slots));
  for (const [scope, slot] of scopes) if (!inUse.has(slot)) scopes.delete(scope);

  return {
    newScopes,
    fills,
    patches,
    publish,
    unpublish,
    retire,
    rejected,
    unchanged,
    next: { services, allocator, nextTree, scopes, nodesHeld, limits: state.limits },
  };
}

function sameSlots(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((s, i) => s === b[i]);
}

function patchOf(
  service: string,
  base: number,
  w: { slots: readonly number[]; keys: readonly number[]; previous: readonly number[] },
): Patch {
  const vs = LAYOUT.canopy_backend.size;
  const count = w.slots.length;
  const keys = Buffer.alloc(count * 4);
  const values = Buffer.alloc(count * vs);
  const previous = Buffer.alloc(count * vs);
  w.slots.forEach((s, i) => {
    writeSlot(keys, i * 4, base + s);
    writeBackend(values, i * vs, keyIp(w.keys[i]!), keyPort(w.keys[i]!));
    writeBackend(previous, i * vs, keyIp(w.previous[i]!), keyPort(w.previous[i]!));
  });
  return { service, keys, values, previous, count };
}

/**
 * Slot of each level's scope; new dynamic scopes take slots no scope name and
 * no published service holds (a service recovered after a restart holds its
 * slots though its scope names are unknown). A string says why it failed.
 */
function scopeSlots(
  levels: readonly string[],
  scopes: ReadonlyMap<string, number>,
  services: ReadonlyMap<string, Published>,
): { levels: number[]; added: Map<string, number> } | string {
  const added = new Map<string, number>();
  const out: number[] = [];
  for (const [i, scope] of levels.entries()) {
    let slot = FIXED_SCOPES.get(scope) ?? scopes.get(scope) ?? added.get(scope);
    if (slot === undefined) {
      const used = new Set([...scopes.values(), ...added.values(), ...[...services.values()].flatMap((s) => s.slots)]);
      for (let s = SCOPE_FIRST_DYNAMIC; s < MAX_SCOPES && slot === undefined; s++) if (!used.has(s)) slot = s;
      if (slot === undefined)
        return `scopes[${i}] ${scope}: no scope slot left (${MAX_SCOPES - SCOPE_FIRST_DYNAMIC} dynamic scopes at most)`;
      added.set(scope, slot);
    }
    out.push(slot);
  }
  return { levels: out, added };
}
