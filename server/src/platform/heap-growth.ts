/**
 * How far V8 lets the old generation grow past what the last full collection
 * kept before it starts marking again (V8's `--heap-growing-percent`).
 *
 * V8 counts every array buffer allocated since the last full collection
 * against that headroom. A push to 2,000 streams with 256 KB responses
 * allocates about 700 MB of them (grpc-js's framed copy of each stream's
 * message, and each distinct response once), a window at a time, against a
 * heap of about 60 MB whose headroom with V8's own factor (1.1 to 1.4, by
 * its heuristics) is about 24 MB. So marking started again as soon as one
 * ended: 17 full collections per flip, their concurrent marking on V8's
 * background threads taking more CPU than the whole main thread.
 * Letting the heap double before the next mark cuts that to about 10, and
 * the flip's CPU by a quarter to a third (docs/benchmarks.md, section 8);
 * RSS stays where glibc's high-water mark puts it.
 *
 * And external memory is counted in the heap's global limit, grown by the
 * same factor (V8's `--external-memory-accounted-in-global-limit`), instead
 * of against V8's fixed 64 MB allowance of array buffers past the last full
 * collection, which started a full collection for every 64 MB of responses
 * whatever the heap: an initial sync to 2,000 streams ran about 14 of them.
 * Counted in the global limit, against go-control-plane at 2,000 streams
 * (docs/benchmarks.md, section P, run AB against run AA) the initial sync
 * cost 40% less CPU, a flip half, and RSS was 150 KB per stream higher
 * (340 KB settled, still a quarter of the peer's).
 *
 * Both flags are read each time V8 works out a limit, so setting them in a
 * running process takes effect at the next collection.
 */
import { setFlagsFromString } from 'node:v8';
import { CodedError } from '../domain/errors.js';

/** `canopy serve`'s default: the old generation may grow to twice what the last full collection kept. */
export const DEFAULT_HEAP_GROWTH_PERCENT = 100;
export const MAX_HEAP_GROWTH_PERCENT = 1000;

/** 0 gives V8 its own factor and its own accounting of external memory back. */
export function setHeapGrowth(percent: number): void {
  if (!Number.isInteger(percent) || percent < 0 || percent > MAX_HEAP_GROWTH_PERCENT) {
    throw new CodedError(
      'CANOPY_BAD_OPTION',
      `heap growth must be an integer from 0 to ${MAX_HEAP_GROWTH_PERCENT}, got ${percent}`,
    );
  }
  setFlagsFromString(`--heap-growing-percent=${percent}`);
  setFlagsFromString(`--${percent > 0 ? '' : 'no-'}external-memory-accounted-in-global-limit`);
}
