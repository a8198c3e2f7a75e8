/**
 * One node's bucket as the agent keeps it (struct canopy_bucket): the
 * endpoints of the node's subtree in slots no other node uses, and the edits
 * that change it by one endpoint with a few slot writes. Pure: edits record
 * which entries they dirtied; the layout turns those into map writes.
 *
 * Unweighted (uniform) buckets keep entries 0..count-1 live: a removed
 * endpoint's entry takes the last one (one slot write, then the count).
 * Weighted buckets keep a removed endpoint as a zero-weight hole and pick by
 * a Fenwick-tree descent, so a weight change or removal rewrites the
 * log2(count) partial sums above the entry. Every bucket keeps its partial
 * sums valid for its weights (in a uniform bucket they never change: all
 * weights are equal), so a service turns weighted without a rewrite.
 * A bucket that is full gets a second segment of its own size (no copy);
 * when that is full too, both are copied into one new segment.
 */
import type { BucketValue } from './abi.js';
import type { Range, SlotAllocator } from './slot-allocator.js';

export interface Bucket {
  seg1: Range;
  seg2: Range | undefined;
  count: number;
  total: number;
  /** Per entry: backend key, weight (0: a hole), Fenwick partial sum of entries (i + 1 - lowbit(i + 1), i + 1]. */
  keys: Float64Array;
  w: Float64Array;
  fen: Float64Array;
  /** Weighted buckets: entries below count with weight 0. */
  holes: number[];
  /** Entries whose slot must be written (this plan's edits). */
  dirty: Set<number>;
  /** Ranges this bucket no longer uses (freed after the grace period). */
  dropped: Range[];
  /** Entries copied into a new segment (compaction): all written, none visible yet. */
  moved: boolean;
}

const lowbit = (i: number) => i & -i;

export function capacity(b: Bucket): number {
  return b.seg1.length + (b.seg2?.length ?? 0);
}

export function slotOf(b: Bucket, i: number): number {
  return i < b.seg1.length ? b.seg1.start + i : b.seg2!.start + (i - b.seg1.length);
}

export function bucketValue(b: Bucket): BucketValue {
  return { base: b.seg1.start, split: b.seg1.length, base2: b.seg2?.start ?? 0, count: b.count, total: b.total };
}

/** A bucket of these entries in `seg` (fresh slots: every entry dirty). */
export function freshBucket(seg: Range, keys: ArrayLike<number>, weights: ArrayLike<number>): Bucket {
  const n = keys.length;
  const k = new Float64Array(seg.length);
  const w = new Float64Array(seg.length);
  const fen = new Float64Array(seg.length);
  let total = 0;
  for (let i = 0; i < n; i++) {
    k[i] = keys[i]!;
    w[i] = weights[i]!;
    total += w[i]!;
    fen[i]! += w[i]!;
    const up = i + 1 + lowbit(i + 1);
    if (up <= n) fen[up - 1]! += fen[i]!;
  }
  return {
    seg1: seg,
    seg2: undefined,
    count: n,
    total,
    keys: k,
    w,
    fen,
    holes: [],
    dirty: new Set(),
    dropped: [],
    moved: false,
  };
}

/** A copy this plan may edit (the state it was planned from stays as it was). */
export function editable(b: Bucket): Bucket {
  return {
    ...b,
    keys: b.keys.slice(),
    w: b.w.slice(),
    fen: b.fen.slice(),
    holes: [...b.holes],
    dirty: new Set(),
    dropped: [],
    moved: false,
  };
}

/** The live entry holding `key` with weight `weight`, or -1. */
function find(b: Bucket, key: number, weight: number): number {
  let from = 0;
  for (;;) {
    const i = b.keys.indexOf(key, from);
    if (i < 0 || i >= b.count) return -1;
    if (b.w[i] === weight && weight > 0) return i;
    from = i + 1;
  }
}

function fenwickAdd(b: Bucket, i: number, delta: number): void {
  for (let j = i + 1; j <= b.count; j += lowbit(j)) {
    b.fen[j - 1]! += delta;
    b.dirty.add(j - 1);
  }
  b.total += delta;
}

/** Room for one more entry: a second segment, or both copied into a new one. False: no room in the map. */
function grow(b: Bucket, allocator: SlotAllocator): boolean {
  if (b.count < capacity(b)) return true;
  if (!b.seg2) {
    const seg2 = allocator.allocate(Math.max(4, b.seg1.length));
    if (!seg2) return false;
    b.seg2 = seg2;
  } else {
    const seg = allocator.allocate(Math.max(8, 2 * b.count));
    if (!seg) return false;
    b.dropped.push(b.seg1, b.seg2);
    b.seg1 = seg;
    b.seg2 = undefined;
    for (let i = 0; i < b.count; i++) b.dirty.add(i);
    b.moved = true;
  }
  const cap = capacity(b);
  const widen = (a: Float64Array) => {
    const c = new Float64Array(cap);
    c.set(a.subarray(0, Math.min(a.length, cap)));
    return c;
  };
  b.keys = widen(b.keys);
  b.w = widen(b.w);
  b.fen = widen(b.fen);
  return true;
}

function append(b: Bucket, key: number, weight: number, allocator: SlotAllocator): boolean {
  if (!grow(b, allocator)) return false;
  const i = b.count++;
  b.keys[i] = key;
  b.w[i] = weight;
  // Entry i + 1 (1-based) covers (i + 1 - lowbit(i + 1), i + 1]; no entry above it exists yet.
  let s = weight;
  for (let j = i; j > i + 1 - lowbit(i + 1); j--) s += b.w[j - 1]!;
  b.fen[i] = s;
  b.total += weight;
  b.dirty.add(i);
  return true;
}

/**
 * One bucket's edits for one version: `remove` and `add` are (key, weight)
 * pairs, with pairs of the same key already matched into `reweight`. False
 * (with a reason) when the bucket cannot take them; the caller lays the
 * service out afresh.
 */
export function edit(
  b: Bucket,
  weighted: boolean,
  remove: readonly [number, number][],
  add: readonly [number, number][],
  reweight: readonly [number, number, number][],
  allocator: SlotAllocator,
): string | undefined {
  for (const [key, from, to] of reweight) {
    const i = find(b, key, from);
    if (i < 0) return `no entry of a backend to reweight`;
    b.w[i] = to;
    fenwickAdd(b, i, to - from);
  }
  let a = 0;
  for (const [key, weight] of remove) {
    const i = find(b, key, weight);
    if (i < 0) return `no entry of a removed backend`;
    const next = add[a];
    if (next && (weighted || next[1] === weight)) {
      // Replaced: the entry takes the new backend.
      a++;
      b.keys[i] = next[0];
      b.dirty.add(i);
      if (next[1] !== weight) {
        b.w[i] = next[1];
        fenwickAdd(b, i, next[1] - weight);
      }
    } else if (weighted) {
      b.w[i] = 0;
      fenwickAdd(b, i, -weight);
      b.holes.push(i);
    } else {
      // The last entry moves into this one (equal weights: the partial sums stay), then the count drops.
      const last = b.count - 1;
      if (i !== last) {
        b.keys[i] = b.keys[last]!;
        b.dirty.add(i);
      }
      b.dirty.delete(last);
      b.count--;
      b.total -= weight;
    }
  }
  for (; a < add.length; a++) {
    const [key, weight] = add[a]!;
    const hole = weighted ? b.holes.pop() : undefined;
    if (hole !== undefined) {
      b.keys[hole] = key;
      b.w[hole] = weight;
      b.dirty.add(hole);
      fenwickAdd(b, hole, weight);
    } else if (!append(b, key, weight, allocator)) {
      return 'endpoint map full';
    }
  }
  // Only holes left: an empty bucket (a connect walks past it to the parent), refilled from entry 0.
  if (weighted && b.total === 0 && b.count > 0) {
    b.count = 0;
    b.holes = [];
    b.dirty.clear();
  }
  return undefined;
}
