/**
 * Gives the pages the C allocator holds free back to the system after a
 * burst (glibc's `malloc_trim`, called through koffi).
 *
 * Every response grpc-js writes is a fresh 256 KB buffer (its framed copy),
 * and glibc, once the first such buffer is freed, raises its mmap threshold
 * above that size and serves the rest from its heap. After an initial sync
 * to 2,000 streams the heap had grown to about 400 MB and stayed there with
 * nothing live in it: free() gives memory back only from the top of the
 * heap, and small long-lived allocations sit above the freed buffers. So
 * RSS per stream was the burst's high-water mark (about 200 KB), not what
 * the process holds. `malloc_trim(0)` hands every free page back, wherever
 * it sits (measured: 400 MB of the heap down to 55 MB, docs/benchmarks.md,
 * "Where SotW memory per stream goes"), at the cost of faulting them in
 * again at the next burst. A fixed mmap threshold (glibc's tunable) would
 * give each buffer back as it is freed, but every allocation then costs a
 * mapping and its page faults: a flip's CPU rose by a quarter.
 *
 * V8 frees array buffers' memory off the main thread after a collection, so
 * the trim runs a moment after it. Where glibc or koffi's binary is missing
 * (musl, another OS), or with `CANOPY_TRIM_MEMORY=off` in the environment
 * (read here, so that worker threads, which inherit it, see it too), nothing
 * is trimmed and memory stays as before.
 */
import { createRequire } from 'node:module';

/** How long after a full collection the trim runs: V8 sweeps array buffers off the main thread meanwhile. */
export const TRIM_DELAY_MS = 200;

type Trim = (pad: number) => number;

let loaded: Trim | null | undefined;

function loadTrim(): Trim | null {
  if (process.platform !== 'linux' || process.env['CANOPY_TRIM_MEMORY'] === 'off') return null;
  try {
    const koffi = createRequire(import.meta.url)('koffi') as typeof import('koffi');
    return koffi.load('libc.so.6').func('int malloc_trim(size_t)') as Trim;
  } catch {
    return null; // not glibc, or no koffi binary for this platform
  }
}

/** Whether this process can give freed pages back (glibc on Linux, koffi loaded). */
export function canReleaseFreedPages(): boolean {
  loaded ??= loadTrim();
  return loaded !== null;
}

/** Gives every free page of the C allocator back to the system now; false where that cannot be done. */
export function releaseFreedPages(): boolean {
  if (!canReleaseFreedPages()) return false;
  loaded!(0);
  return true;
}

/** Releases the freed pages once V8 has swept the array buffers a collection just freed. */
export function releaseFreedPagesSoon(): void {
  if (!canReleaseFreedPages()) return;
  setTimeout(releaseFreedPages, TRIM_DELAY_MS).unref();
}
