/**
 * A service's slots and node entries as the agent keeps them, and the two
 * ways a version gets into the maps (pure; the Datapath writes):
 *
 * - full: every bucket in one fresh range under a fresh tree id, published by
 *   one service write (planner.ts) — a new service, or a changed shape;
 * - edited in (O(change), layout-edit.ts): the version's changes, per owning node, applied
 *   to the buckets on each changed endpoint's path (bucket.ts): a few slot
 *   writes and one write per changed node, new nodes in fresh slots, removed
 *   ones deleted. No write makes a connect see a mix: every slot a connect
 *   can read holds a backend of the old version or of the new one, and each
 *   node's count and segments change in one value write.
 */
import type { Placement as NodePlacement } from '../domain/locality.js';
import type { TreeMessage } from '../resources/tree-codec.js';
import { SVC_SPILL } from './abi-spill.js';
import { svcValue } from './abi-svc.js';
import {
  LAYOUT,
  SVC_WEIGHTED,
  writeAddressRef,
  writeBackend,
  writeNode,
  writeNodeKey,
  writeSlot,
  type BucketValue,
} from './abi.js';
import { bucketValue, freshBucket, slotOf, type Bucket } from './bucket.js';
import { hereOf } from './here-bucket.js';
import { membersOf, place, type Placement } from './placement.js';
import type { Range, SlotAllocator } from './slot-allocator.js';
import { weights } from './tree-shape.js';

export interface LayoutNode {
  readonly id: string;
  readonly key: Buffer;
  readonly parent: string;
  readonly index: number;
  readonly bucket: Bucket;
}

export interface ServiceLayout {
  /** Everything that must be equal for a version to be edited in: mode, scopes and their slots, family. */
  readonly shape: string;
  readonly tree: number;
  readonly mode: number;
  readonly levelScope: readonly number[];
  /** The tree's scope per level (the node's own path, canopy_svc.here). */
  readonly scopes: readonly string[];
  readonly depth: number;
  /** Picks by weight (once weighted, until the next full layout). */
  readonly weighted: boolean;
  /** A load-aware service (CANOPY_SVC_SPILL): the pick follows its canopy_spill entries. */
  readonly spill: boolean;
  readonly v6: boolean;
  readonly root: Bucket;
  readonly nodes: ReadonlyMap<string, LayoutNode>;
  /** Per owning node ('real|merged'): its backends' keys and weights, interleaved. */
  readonly owned: ReadonlyMap<string, number[]>;
  /** IPv6: address → the slot that holds it (the backend's key); kept until the next full layout. */
  readonly addresses: ReadonlyMap<string, number>;
  readonly addressRanges: readonly Range[];
}

export interface MapWrite {
  readonly map: 'endpoints' | 'nodes' | 'services';
  readonly key: Buffer;
  /** null: delete. */
  readonly value: Buffer | null;
  /** What it replaces (null: nothing a connect can see, or a new entry), for a rollback. */
  readonly previous: Buffer | null;
}

const VS = LAYOUT.canopy_backend.size;

export function shapeOf(t: TreeMessage, mode: number, levelScope: readonly number[]): string {
  return [mode, t.vip6 ? 6 : 4, t.scopes.join('\u0000'), levelScope.join(',')].join('\u0001');
}

export function addressText(b: TreeMessage['backends'][number]): string {
  return `${Buffer.from(b.ipv6!).toString('hex')}:${b.port}`;
}

function writeSlotValue(b: Buffer, off: number, v6: boolean, key: number, wsum: number): void {
  if (v6) writeAddressRef(b, off, key, wsum);
  else writeBackend(b, off, Math.floor(key / 65536), key % 65536, wsum);
}

export function slotValue(v6: boolean, key: number, wsum: number): Buffer {
  const b = Buffer.alloc(VS);
  writeSlotValue(b, 0, v6, key, wsum);
  return b;
}

export function u32(n: number): Buffer {
  const b = Buffer.alloc(4);
  writeSlot(b, 0, n);
  return b;
}

export function nodeKey(tree: number, level: number, hash: bigint): Buffer {
  const b = Buffer.alloc(LAYOUT.canopy_node_key.size);
  writeNodeKey(b, 0, { tree, level, value: hash });
  return b;
}

export function nodeValue(v: BucketValue, id: number): Buffer {
  const b = Buffer.alloc(LAYOUT.canopy_node.size);
  writeNode(b, 0, { ...v, id });
  return b;
}

/** Every slot range a layout holds (buckets and address slots). */
export function heldRanges(l: ServiceLayout): Range[] {
  const out: Range[] = [...l.addressRanges];
  for (const b of [l.root, ...[...l.nodes.values()].map((n) => n.bucket)]) {
    out.push(b.seg1);
    if (b.seg2) out.push(b.seg2);
  }
  return out.filter((r) => r.length > 0);
}

/** The service value; with the node's placement, its deepest bucket projected (here-bucket.ts). */
export function layoutValue(l: ServiceLayout, node: NodePlacement | undefined): Buffer {
  const here = hereOf(l, node);
  return svcValue({
    tree: l.tree,
    mode: l.mode,
    depth: l.depth,
    levelScope: l.levelScope,
    flags: (l.weighted ? SVC_WEIGHTED : 0) | (l.spill ? SVC_SPILL : 0),
    root: bucketValue(l.root),
    ...(here ? { here } : {}),
  });
}

export interface FullLayout {
  readonly layout: ServiceLayout;
  /** Fresh slots and node entries, written before the service entry publishes them. */
  readonly endpoints: { readonly keys: Buffer; readonly values: Buffer; readonly count: number };
  readonly nodes: { readonly keys: Buffer; readonly values: Buffer; readonly count: number };
  readonly value: Buffer;
}

/** The whole tree in one fresh range; a string says why there is no room. */
export function fullLayout(
  t: TreeMessage,
  tree: number,
  mode: number,
  levelScope: readonly number[],
  allocator: SlotAllocator,
  node?: NodePlacement,
): FullLayout | string {
  const pl = place(t);
  const v6 = !!t.vip6;
  const n = t.backends.length;
  const { addresses, firstOf } = distinctAddresses(t, v6);
  const members = pl.nodes.reduce((s, x) => s + x.end - x.start, 0);
  const total = n + members + addresses.size;
  const range = allocator.allocate(total);
  if (!range)
    return `endpoint map full: ${total} slots needed, ${allocator.capacity - allocator.inUse} free of ${allocator.capacity}`;
  const addrBase = range.start + n + members;
  const keys = new Float64Array(n);
  const w = new Float64Array(n);
  t.backends.forEach((b, i) => {
    keys[i] = v6 ? addrBase + addresses.get(addressText(b))! : b.ipv4 * 65536 + b.port;
    w[i] = b.weight;
  });
  const epKeys = Buffer.alloc(total * 4);
  const epValues = Buffer.alloc(total * VS);
  let at = 0;
  const put = (bucket: Bucket) => {
    for (let i = 0; i < bucket.count; i++, at++) {
      writeSlot(epKeys, at * 4, slotOf(bucket, i));
      writeSlotValue(epValues, at * VS, v6, bucket.keys[i]!, bucket.fen[i]!);
    }
  };
  let offset = range.start;
  const root = freshBucket({ start: offset, length: n }, keys, w);
  offset += n;
  put(root);
  const nodes = new Map<string, LayoutNode>();
  const nodeKeys = Buffer.alloc(pl.nodes.length * LAYOUT.canopy_node_key.size);
  const nodeValues = Buffer.alloc(pl.nodes.length * LAYOUT.canopy_node.size);
  pl.nodes.forEach((p, j) => {
    const m = membersOf(p);
    const bucket = freshBucket({ start: offset, length: m.length }, pick(keys, m), pick(w, m));
    offset += m.length;
    put(bucket);
    const key = nodeKey(tree, p.level, p.hash);
    key.copy(nodeKeys, j * LAYOUT.canopy_node_key.size);
    nodeValue(bucketValue(bucket), p.index).copy(nodeValues, j * LAYOUT.canopy_node.size);
    nodes.set(p.id, { id: p.id, key, parent: p.parent, index: p.index, bucket });
  });
  firstOf.forEach((i, j) => {
    const b = t.backends[i]!;
    writeSlot(epKeys, at * 4, addrBase + j);
    writeBackend(epValues, at * VS, 0, b.port, 0, b.ipv6);
    at++;
  });
  const layout: ServiceLayout = {
    shape: shapeOf(t, mode, levelScope),
    tree,
    mode,
    levelScope,
    scopes: t.scopes,
    depth: t.scopes.length,
    weighted: weights(t.backends).weighted,
    spill: t.loadAware === true,
    v6,
    root,
    nodes,
    owned: ownedOf(pl, keys, w),
    addresses: new Map([...addresses].map(([text, j]) => [text, addrBase + j])),
    addressRanges: addresses.size > 0 ? [{ start: addrBase, length: addresses.size }] : [],
  };
  return {
    layout,
    endpoints: { keys: epKeys, values: epValues, count: total },
    nodes: { keys: nodeKeys, values: nodeValues, count: pl.nodes.length },
    value: layoutValue(layout, node),
  };
}

/** IPv6: each distinct address once, by the first backend that has it (none for IPv4). */
function distinctAddresses(t: TreeMessage, v6: boolean) {
  const addresses = new Map<string, number>();
  const firstOf: number[] = [];
  if (v6)
    t.backends.forEach((b, i) => {
      const text = addressText(b);
      if (addresses.has(text)) return;
      addresses.set(text, addresses.size);
      firstOf.push(i);
    });
  return { addresses, firstOf };
}

/** `from` at the indexes `at`. */
function pick(from: Float64Array, at: ArrayLike<number>): Float64Array {
  const out = new Float64Array(at.length);
  for (let i = 0; i < at.length; i++) out[i] = from[at[i]!]!;
  return out;
}

export function ownedOf(pl: Placement, keys: ArrayLike<number>, w: ArrayLike<number>): Map<string, number[]> {
  const owned = new Map<string, number[]>();
  pl.owner.forEach((o, i) => {
    let g = owned.get(o);
    if (!g) owned.set(o, (g = []));
    g.push(keys[i]!, w[i]!);
  });
  return owned;
}
