/**
 * Ranges of slots in the endpoint array map: each tree version takes one
 * contiguous range, so a node's subtree is [base + start, base + start + count).
 * First fit over a sorted free list; freed ranges coalesce with neighbours.
 * Pure: no I/O.
 */
import { CodedError } from '../domain/errors.js';

export interface Range {
  readonly start: number;
  readonly length: number;
}

export class SlotAllocator {
  /** Sorted, non-overlapping, non-adjacent free ranges. */
  private free: Range[];
  private used = 0;

  constructor(readonly capacity: number) {
    this.free = capacity > 0 ? [{ start: 0, length: capacity }] : [];
  }

  get inUse(): number {
    return this.used;
  }

  /** The first range that fits, or undefined when none does. Length 0 gets {start 0, length 0}. */
  allocate(length: number): Range | undefined {
    if (length === 0) return { start: 0, length: 0 };
    const i = this.free.findIndex((r) => r.length >= length);
    if (i < 0) return undefined;
    const r = this.free[i]!;
    if (r.length === length) this.free.splice(i, 1);
    else this.free[i] = { start: r.start + length, length: r.length - length };
    this.used += length;
    return { start: r.start, length };
  }

  /** Marks a range used (recovering state from pinned maps); throws if any of it is taken. */
  reserve(range: Range): void {
    if (range.length === 0) return;
    const end = range.start + range.length;
    const i = this.free.findIndex((r) => r.start <= range.start && r.start + r.length >= end);
    if (i < 0) throw new CodedError('CANOPY_BROKEN_INVARIANT', `slots [${range.start}, ${end}) are not free`);
    const r = this.free[i]!;
    const parts: Range[] = [];
    if (r.start < range.start) parts.push({ start: r.start, length: range.start - r.start });
    if (r.start + r.length > end) parts.push({ start: end, length: r.start + r.length - end });
    this.free.splice(i, 1, ...parts);
    this.used += range.length;
  }

  release(range: Range): void {
    if (range.length === 0) return;
    const end = range.start + range.length;
    let i = 0;
    while (i < this.free.length && this.free[i]!.start < range.start) i++;
    const prev = this.free[i - 1];
    const next = this.free[i];
    if ((prev && prev.start + prev.length > range.start) || (next && next.start < end) || end > this.capacity) {
      throw new CodedError('CANOPY_BROKEN_INVARIANT', `slots [${range.start}, ${end}) were not allocated`);
    }
    let merged: Range = range;
    let from = i;
    let count = 0;
    if (prev && prev.start + prev.length === range.start) {
      merged = { start: prev.start, length: prev.length + merged.length };
      from = i - 1;
      count++;
    }
    if (next && next.start === end) {
      merged = { start: merged.start, length: merged.length + next.length };
      count++;
    }
    this.free.splice(from, count, merged);
    this.used -= range.length;
  }

  /** An independent copy, so a plan can allocate and be dropped without touching this one. */
  clone(): SlotAllocator {
    const c = new SlotAllocator(this.capacity);
    c.free = [...this.free];
    c.used = this.used;
    return c;
  }

  /** Free ranges, for tests and debug output. */
  freeRanges(): readonly Range[] {
    return this.free;
  }
}

/** Releases ranges, adjacent ones joined first (the allocator frees a range at a time). */
export function releaseAll(allocator: SlotAllocator, ranges: readonly Range[]): void {
  const sorted = ranges.filter((r) => r.length > 0).sort((a, b) => a.start - b.start);
  let run: Range | undefined;
  for (const r of sorted) {
    if (run && run.start + run.length === r.start) run = { start: run.start, length: run.length + r.length };
    else {
      if (run) allocator.release(run);
      run = r;
    }
  }
  if (run) allocator.release(run);
}
