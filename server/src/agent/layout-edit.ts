/**
 * A version edited into a service's layout (layout.ts): per owning node, the
 * backends that left or came (a changed weight is both), applied to the
 * buckets on each one's path (bucket.ts); new nodes get fresh buckets,
 * published by their node entry; nodes that are gone are deleted (connects
 * fall back to the parent) and their slots freed a grace period later.
 * Writes go slots first, then node entries, then the service entry, so a
 * count never covers an entry not yet written. Pure.
 */
import type { Placement as NodePlacement } from '../domain/locality.js';
import type { TreeMessage } from '../resources/tree-codec.js';
import { LAYOUT, writeBackend } from './abi.js';
import { bucketValue, capacity, edit, editable, freshBucket, slotOf, type Bucket } from './bucket.js';
import {
  addressText,
  layoutValue,
  nodeKey,
  nodeValue,
  ownedOf,
  shapeOf,
  slotValue,
  u32,
  type LayoutNode,
  type MapWrite,
  type ServiceLayout,
} from './layout.js';
import { membersOf, place, type PlacedNode } from './placement.js';
import type { Range, SlotAllocator } from './slot-allocator.js';
import { weights } from './tree-shape.js';

/** More changed endpoints than this in one version: laid out afresh (cheaper than edits by then). */
export const MAX_EDITS = 64;

const VS = LAYOUT.canopy_backend.size;

/** A bucket's pending edits: per key, the weights removed and added. */
type Edits = Map<number, { rm: number[]; add: number[] }>;

export interface EditedLayout {
  readonly layout: ServiceLayout;
  /** In order: slots, then node entries, then the service entry, then deletes of nodes that are gone. */
  readonly writes: readonly MapWrite[];
  /** Slot ranges no longer used (freed one grace period later). */
  readonly retire: readonly Range[];
  /** Node entries added minus deleted. */
  readonly nodeDelta: number;
  readonly value: Buffer;
}

/** The version edited into the layout, or why it must be laid out afresh. */
export function editLayout(
  old: ServiceLayout,
  t: TreeMessage,
  mode: number,
  levelScope: readonly number[],
  allocator: SlotAllocator,
  nodesFree: number,
  serviceKey: Buffer,
  node?: NodePlacement,
): EditedLayout | string {
  if (shapeOf(t, mode, levelScope) !== old.shape) return 'the mode, scopes or family changed';
  const pl = place(t);
  const d: Draft = {
    old,
    allocator,
    writes: [],
    nodeWrites: [],
    deletes: [],
    retire: [],
    nodes: new Map(old.nodes),
    nodeDelta: 0,
    root: old.root,
  };
  const keyed = keyBackends(d, t);
  if (typeof keyed === 'string') return keyed;
  const owned = ownedOf(pl, keyed.keys, keyed.w);
  const placed = new Map(pl.nodes.map((p) => [p.id, p]));
  const perBucket = bucketEdits(old, placed, owned);
  if (typeof perBucket === 'string') return perBucket;
  const weighted = old.weighted || weights(t.backends).weighted;
  const full = addNodes(d, pl.nodes, keyed, nodesFree);
  if (full) return full;
  dropGoneNodes(d, placed);
  const bad = editBuckets(d, perBucket, placed, weighted);
  if (bad) return bad;
  const { addresses, addressRanges } = keyed;
  const layout: ServiceLayout = { ...old, weighted, root: d.root, nodes: d.nodes, owned, addresses, addressRanges };
  const value = layoutValue(layout, node);
  const previous = layoutValue(old, node);
  const writes = d.writes;
  writes.push(...d.nodeWrites);
  // The root, the weighting, or the node's own deepest bucket (canopy_svc.here) changed.
  if (!value.equals(previous)) writes.push({ map: 'services', key: serviceKey, value, previous });
  writes.push(...d.deletes);
  return { layout, writes, retire: d.retire.filter((r) => r.length > 0), nodeDelta: d.nodeDelta, value };
}

/** What an edit builds up, step by step, before the layout is put together. */
interface Draft {
  readonly old: ServiceLayout;
  readonly allocator: SlotAllocator;
  /** Slot writes (first, so a count never covers an entry not yet written). */
  readonly writes: MapWrite[];
  /** Node entries, new or whose bucket changed (after the slots). */
  readonly nodeWrites: MapWrite[];
  /** Node entries of nodes that are gone (last). */
  readonly deletes: MapWrite[];
  readonly retire: Range[];
  readonly nodes: Map<string, LayoutNode>;
  nodeDelta: number;
  root: Bucket;
}

/** The version's backends as keys and weights, and the IPv6 address slots they need. */
interface KeyedBackends {
  readonly keys: Float64Array;
  readonly w: Float64Array;
  readonly addresses: ReadonlyMap<string, number>;
  readonly addressRanges: readonly Range[];
}

/**
 * Each backend's key and weight. Keys: IPv4 ip:port; IPv6 the slot of the address (a new address takes a fresh
 * slot, written here).
 */
function keyBackends(d: Draft, t: TreeMessage): KeyedBackends | string {
  const { old, allocator } = d;
  let addresses = old.addresses as Map<string, number>;
  const addressRanges = [...old.addressRanges];
  const keys = new Float64Array(t.backends.length);
  const w = new Float64Array(t.backends.length);
  for (let i = 0; i < t.backends.length; i++) {
    const b = t.backends[i]!;
    w[i] = b.weight;
    if (!old.v6) {
      keys[i] = b.ipv4 * 65536 + b.port;
      continue;
    }
    const text = addressText(b);
    let slot = addresses.get(text);
    if (slot === undefined) {
      if (addresses === old.addresses) addresses = new Map(addresses);
      if (addresses.size > 2 * t.backends.length + 64) return 'too many retired addresses';
      const r = allocator.allocate(1);
      if (!r) return 'endpoint map full';
      slot = r.start;
      addresses.set(text, slot);
      addressRanges.push(r);
      const v = Buffer.alloc(VS);
      writeBackend(v, 0, 0, b.port, 0, b.ipv6);
      d.writes.push({ map: 'endpoints', key: u32(slot), value: v, previous: null });
    }
    keys[i] = slot;
  }
  return { keys, w, addresses, addressRanges };
}

/** Which buckets change: per owner, the backends that left or came (a changed weight is both). */
function bucketEdits(
  old: ServiceLayout,
  placed: ReadonlyMap<string, PlacedNode>,
  owned: ReadonlyMap<string, number[]>,
): Map<string, Edits> | string {
  const perBucket = new Map<string, Edits>();
  let changes = 0;
  const note = (owner: string, key: number, weight: number, added: boolean) => {
    changes++;
    const [real, merged] = owner.split('|') as [string, string];
    for (const start of [real, merged]) {
      for (let id = start; id !== '';) {
        editOf(perBucket, id, key)[added ? 'add' : 'rm'].push(weight);
        id = added ? (placed.get(id)?.parent ?? '') : (old.nodes.get(id)?.parent ?? '');
      }
    }
    editOf(perBucket, '', key)[added ? 'add' : 'rm'].push(weight);
  };
  for (const owner of new Set([...old.owned.keys(), ...owned.keys()])) {
    const before = old.owned.get(owner) ?? [];
    const after = owned.get(owner) ?? [];
    if (sameList(before, after)) continue;
    const left = new Map<string, number>();
    for (let i = 0; i < before.length; i += 2)
      left.set(`${before[i]}/${before[i + 1]}`, (left.get(`${before[i]}/${before[i + 1]}`) ?? 0) + 1);
    for (let i = 0; i < after.length; i += 2) {
      const k = `${after[i]}/${after[i + 1]}`;
      const c = left.get(k) ?? 0;
      if (c > 0) left.set(k, c - 1);
      else note(owner, after[i]!, after[i + 1]!, true);
    }
    for (const [k, c] of left) {
      const [key, weight] = k.split('/').map(Number) as [number, number];
      for (let j = 0; j < c; j++) note(owner, key, weight, false);
    }
    if (changes > MAX_EDITS) return `more than ${MAX_EDITS} endpoints changed`;
  }
  return perBucket;
}

/** New nodes: fresh buckets, published by their node entry. */
function addNodes(
  d: Draft,
  placedNodes: readonly PlacedNode[],
  { keys, w }: KeyedBackends,
  nodesFree: number,
): string | undefined {
  const { old, allocator } = d;
  for (const p of placedNodes) {
    if (old.nodes.has(p.id)) continue;
    if (d.nodeDelta >= nodesFree) return 'node map full';
    const m = membersOf(p);
    const seg = allocator.allocate(m.length);
    if (!seg) return 'endpoint map full';
    const bk = new Float64Array(m.length);
    const bw = new Float64Array(m.length);
    for (let i = 0; i < m.length; i++) {
      bk[i] = keys[m[i]!]!;
      bw[i] = w[m[i]!]!;
    }
    const bucket = freshBucket(seg, bk, bw);
    for (let i = 0; i < bucket.count; i++)
      d.writes.push({
        map: 'endpoints',
        key: u32(slotOf(bucket, i)),
        value: slotValue(old.v6, bk[i]!, bucket.fen[i]!),
        previous: null,
      });
    const key = nodeKey(old.tree, p.level, p.hash);
    d.nodeWrites.push({ map: 'nodes', key, value: nodeValue(bucketValue(bucket), p.index), previous: null });
    d.nodes.set(p.id, { id: p.id, key, parent: p.parent, index: p.index, bucket });
    d.nodeDelta++;
  }
  return undefined;
}

/** Nodes that are gone: deleted (connects fall back to the parent), their slots freed later. */
function dropGoneNodes(d: Draft, placed: ReadonlyMap<string, PlacedNode>): void {
  for (const [id, n] of d.old.nodes) {
    if (placed.has(id)) continue;
    d.deletes.push({ map: 'nodes', key: n.key, value: null, previous: nodeValue(bucketValue(n.bucket), n.index) });
    d.retire.push(n.bucket.seg1, ...(n.bucket.seg2 ? [n.bucket.seg2] : []));
    d.nodes.delete(id);
    d.nodeDelta--;
  }
}

/** The buckets on the changed endpoints' paths, edited in place: their changed slots and node entries. */
function editBuckets(
  d: Draft,
  perBucket: ReadonlyMap<string, Edits>,
  placed: ReadonlyMap<string, PlacedNode>,
  weighted: boolean,
): string | undefined {
  const { old } = d;
  for (const [id, edits] of perBucket) {
    const was = id === '' ? old.root : old.nodes.get(id)?.bucket;
    if (!was || (id !== '' && !placed.has(id))) continue; // new (filled whole) or gone
    const { rm, add, re } = pairEdits(edits);
    if (rm.length + add.length + re.length === 0) continue;
    const b = editable(was);
    const bad = edit(b, weighted, rm, add, re, d.allocator);
    if (bad) return bad;
    for (const i of b.dirty) {
      if (i >= b.count) continue;
      const visible = !b.moved && i < was.count && slotOf(was, i) === slotOf(b, i);
      d.writes.push({
        map: 'endpoints',
        key: u32(slotOf(b, i)),
        value: slotValue(old.v6, b.keys[i]!, b.fen[i]!),
        previous: visible ? slotValue(old.v6, was.keys[i]!, was.fen[i]!) : null,
      });
    }
    d.retire.push(...b.dropped);
    b.dirty = new Set();
    b.dropped = [];
    if (id === '') {
      d.root = b;
      continue;
    }
    const n = old.nodes.get(id)!;
    d.nodes.set(id, { ...n, bucket: b });
    if (!sameBucket(was, b))
      d.nodeWrites.push({
        map: 'nodes',
        key: n.key,
        value: nodeValue(bucketValue(b), n.index),
        previous: nodeValue(bucketValue(was), n.index),
      });
  }
  return undefined;
}

/**
 * One bucket's edits as removals, additions and re-weights: the same backend that left and came is nothing here
 * (a move under this node) or a new weight.
 */
function pairEdits(edits: Edits): { rm: [number, number][]; add: [number, number][]; re: [number, number, number][] } {
  const rm: [number, number][] = [];
  const add: [number, number][] = [];
  const re: [number, number, number][] = [];
  for (const [key, e] of edits) {
    e.rm.sort((a, b) => a - b);
    e.add.sort((a, b) => a - b);
    while (e.rm.length > 0 && e.add.length > 0) {
      const from = e.rm.pop()!;
      const to = e.add.pop()!;
      if (from !== to) re.push([key, from, to]);
    }
    for (const x of e.rm) rm.push([key, x]);
    for (const x of e.add) add.push([key, x]);
  }
  return { rm, add, re };
}

function editOf(per: Map<string, Edits>, id: string, key: number): { rm: number[]; add: number[] } {
  let e = per.get(id);
  if (!e) per.set(id, (e = new Map()));
  let x = e.get(key);
  if (!x) e.set(key, (x = { rm: [], add: [] }));
  return x;
}

function sameBucket(a: Bucket, b: Bucket): boolean {
  return (
    a.seg1.start === b.seg1.start &&
    a.seg1.length === b.seg1.length &&
    a.seg2?.start === b.seg2?.start &&
    a.count === b.count &&
    a.total === b.total &&
    capacity(a) === capacity(b)
  );
}

function sameList(a: readonly number[], b: readonly number[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
