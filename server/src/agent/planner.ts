/**
 * Plans how a set of locality trees becomes BPF map operations, without
 * touching the kernel. Pure: the Datapath executes the plan.
 *
 * For every service whose tree changed, either its changes are edited into
 * the buckets it has (layout.ts: a few writes per changed endpoint), or,
 * for a new service, a changed shape or many changes, the full way:
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
import type { Placement } from '../domain/locality.js';
import type { TreeMessage } from '../resources/tree-codec.js';
import {
  MAX_SCOPES,
  MODE,
  SCOPE_FIRST_DYNAMIC,
  SCOPE_REGION,
  SCOPE_SUBZONE,
  SCOPE_ZONE,
  svcKey,
  type SvcKey,
} from './abi.js';
import { spillFlag } from './spill-plan.js';
import { editLayout } from './layout-edit.js';
import { fullLayout, heldRanges, type MapWrite, type ServiceLayout } from './layout.js';
import { mergedTree } from './merged-tree.js';
import { isNetworkFirst } from './placement.js';
import { checkTree, siblingClash, weights } from './tree-shape.js';
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
  /** The endpoint slots it holds. */
  readonly ranges: readonly Range[];
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
  /** Its buckets, for a later version edited in (unknown after a restart). */
  readonly layout?: ServiceLayout;
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
  /** The node's own placement (canopy_nodeloc): its deepest bucket goes into each service value. */
  node?: Placement;
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

/** A version edited into the service's buckets (layout.ts): writes in order, no switch. */
export interface Patch {
  readonly service: string;
  readonly writes: readonly MapWrite[];
  /** Slot ranges it no longer uses, freed one grace period later. */
  readonly retire: readonly Range[];
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
  /** Versions edited in: slot and node writes, each connect sees the old version or the new. */
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
  const d: Planning = {
    state,
    rejected: [],
    services: new Map(state.services),
    unpublish: [],
    retire: [],
    allocator: state.allocator.clone(),
    scopes: new Map(state.scopes),
    newScopes: [],
    nextTree: state.nextTree,
    nodesHeld: state.nodesHeld,
    fills: [],
    patches: [],
    publish: [],
    unchanged: 0,
  };
  // 1. What each tree asks for, checked on its own.
  const { accepted, claimed } = acceptTrees(d, trees);
  // 2. Removals: held services no tree claims, unless rejected or kept.
  planRemovals(d, claimed, new Set([...keep, ...d.rejected.map((r) => r.service)]));
  // 3. Each accepted tree: scope slots, room, then its edits or its fill.
  for (const it of accepted) planTree(d, it);
  // 4. A dynamic scope no service uses any more gives its slot back.
  const inUse = new Set([...d.services.values()].flatMap((s) => s.slots));
  for (const [scope, slot] of d.scopes) if (!inUse.has(slot)) d.scopes.delete(scope);

  const { services, allocator, nextTree, scopes, nodesHeld } = d;
  return {
    newScopes: d.newScopes,
    fills: d.fills,
    patches: d.patches,
    publish: d.publish,
    unpublish: d.unpublish,
    retire: d.retire,
    rejected: d.rejected,
    unchanged: d.unchanged,
    next: {
      services,
      allocator,
      nextTree,
      scopes,
      nodesHeld,
      limits: state.limits,
      ...(state.node ? { node: state.node } : {}),
    },
  };
}

/** A plan as it is built: what it does so far and the state it leads to. `state` is the one planned from. */
interface Planning {
  readonly state: AgentState;
  readonly rejected: Rejected[];
  readonly services: Map<string, Published>;
  readonly unpublish: { service: string; key: Buffer; previous: Buffer }[];
  readonly retire: Published[];
  allocator: SlotAllocator;
  readonly scopes: Map<string, number>;
  readonly newScopes: { scope: string; slot: number }[];
  nextTree: number;
  nodesHeld: number;
  readonly fills: Fill[];
  readonly patches: Patch[];
  readonly publish: { service: string; key: Buffer; value: Buffer; previous?: Buffer }[];
  unchanged: number;
}

function reject(d: Planning, t: TreeMessage, detail: string, capacity = false): void {
  d.rejected.push({ service: t.service, detail: `service ${t.service}: ${detail}`, ...(capacity ? { capacity } : {}) });
}

/** The trees that can be loaded, each with a vip:port of its own; the others rejected. */
function acceptTrees(
  d: Planning,
  trees: readonly IncomingTree[],
): { accepted: IncomingTree[]; claimed: Map<string, string> } {
  const accepted: IncomingTree[] = [];
  const claimed = new Map<string, string>();
  // A service already holding a vip:port goes first, so it keeps it against a newcomer.
  const holds = (it: IncomingTree) => (d.state.services.get(keyString(it.tree))?.name === it.tree.service ? 1 : 0);
  for (const it of [...trees].sort((a, b) => holds(b) - holds(a))) {
    const bad = checkTree(it.tree);
    if (bad !== undefined) {
      reject(d, it.tree, bad);
      continue;
    }
    const ks = keyString(it.tree);
    const other = claimed.get(ks);
    if (other !== undefined) {
      reject(d, it.tree, `vip:port is also used by service ${other}`);
      continue;
    }
    claimed.set(ks, it.tree.service);
    accepted.push(it);
  }
  return { accepted, claimed };
}

/** Held services no tree claims, unpublished and retired (unless `keepNames` holds them). */
function planRemovals(d: Planning, claimed: ReadonlyMap<string, string>, keepNames: ReadonlySet<string>): void {
  for (const [ks, held] of d.state.services) {
    if (claimed.has(ks) || keepNames.has(held.name)) continue;
    d.unpublish.push({ service: held.name, key: svcKey(held.key), previous: held.value });
    d.retire.push(held);
    d.services.delete(ks);
  }
}

/** One accepted tree: unchanged, rejected, edited into its buckets, or laid out afresh. */
function planTree(d: Planning, { tree: t, hash }: IncomingTree): void {
  const held = d.services.get(keyString(t));
  const slots = scopeSlots(t.scopes, d.scopes, d.services);
  if (typeof slots === 'string') return reject(d, t, slots);
  if (held && held.hash === hash && held.name === t.service) {
    d.unchanged++;
    return;
  }
  const { totalWeight } = weights(t.backends);
  if (totalWeight > 0xffffffff) return reject(d, t, `endpoint weights add up to ${totalWeight}, more than 2^32 - 1`);
  const spill = spillFlag(t, held?.value); // a change of load awareness takes the full path
  const clash = siblingClash(t);
  if (clash !== undefined) return reject(d, t, clash);
  const mode = isNetworkFirst(t) ? MODE.networkFirst : MODE[t.mode];
  if (held?.layout && held.name === t.service && spill.same && planEdit(d, t, hash, held, mode, slots)) return;
  planFull(d, t, hash, held, mode, slots);
}

type ScopeSlots = { levels: number[]; added: Map<string, number> };

function takeScopes(d: Planning, slots: ScopeSlots): void {
  for (const [scope, slot] of slots.added) {
    d.scopes.set(scope, slot);
    d.newScopes.push({ scope, slot });
  }
}

/** The version edited into the buckets the service holds; false if it must be laid out afresh. */
function planEdit(
  d: Planning,
  t: TreeMessage,
  hash: string,
  held: Published,
  mode: number,
  slots: ScopeSlots,
): boolean {
  const a = d.allocator.clone();
  const free = d.state.limits.nodes - d.nodesHeld;
  const e = editLayout(held.layout!, t, mode, slots.levels, a, free, svcKey(t), d.state.node);
  if (typeof e === 'string') return false;
  d.allocator = a;
  d.nodesHeld += e.nodeDelta;
  takeScopes(d, slots);
  d.patches.push({ service: t.service, writes: e.writes, retire: e.retire });
  d.services.set(keyString(t), { ...held, ...held$(e.layout), hash, value: e.value, endpoints: t.backends.length });
  return true;
}

/** The full way: room checked, a fresh range and tree id filled, published by one service write. */
function planFull(
  d: Planning,
  t: TreeMessage,
  hash: string,
  held: Published | undefined,
  mode: number,
  slots: ScopeSlots,
): void {
  const { limits } = d.state;
  if (!held && d.services.size >= limits.services)
    return reject(d, t, `service map full: ${limits.services} services at most (--max-services)`);
  const nodeCount = t.nodes.length - 1 + (isNetworkFirst(t) ? mergedTree(t).nodes.length : 0);
  if (d.nodesHeld + nodeCount > limits.nodes) {
    const free = limits.nodes - d.nodesHeld;
    const detail = `node map full: ${nodeCount} entries needed, ${free} free of ${limits.nodes} (--max-nodes; retired trees hold theirs for one grace period)`;
    return reject(d, t, detail, true);
  }
  const treeId = d.nextTree;
  const f = fullLayout(t, treeId, mode, slots.levels, d.allocator, d.state.node);
  if (typeof f === 'string')
    return reject(d, t, `${f} (--max-endpoints; retired trees hold theirs for one grace period)`, true);
  d.nextTree = d.nextTree >= 0xffffffff ? 1 : d.nextTree + 1;
  takeScopes(d, slots);
  d.nodesHeld += nodeCount;
  d.fills.push({ service: t.service, endpoints: f.endpoints, nodes: f.nodes });
  d.publish.push({ service: t.service, key: svcKey(t), value: f.value, ...(held ? { previous: held.value } : {}) });
  if (held) d.retire.push(held);
  d.services.set(keyString(t), {
    endpoints: t.backends.length,
    name: t.service,
    key: { vip: t.vip, port: t.port, ...(t.vip6 ? { vip6: t.vip6 } : {}) },
    tree: treeId,
    value: f.value,
    slots: slots.levels,
    hash,
    ...held$(f.layout),
  });
}

/** What a Published keeps of its layout. */
function held$(layout: ServiceLayout): Pick<Published, 'layout' | 'ranges' | 'nodeKeys' | 'nodeCount'> {
  const keys = [...layout.nodes.values()].map((n) => n.key);
  return { layout, ranges: heldRanges(layout), nodeKeys: Buffer.concat(keys), nodeCount: keys.length };
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
): ScopeSlots | string {
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
