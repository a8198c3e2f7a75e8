/**
 * Encoded responses shared by every stream that needs the same bytes, on the
 * initial path as well as on pushes: a response is materialized once and the
 * same Buffer handed to each stream's transport.
 *
 * A push reaches streams in connection order, and streams that get the same
 * CLA are far apart in it: held only weakly, a 256 KB response is collected
 * between two of its streams and encoded again (a flip to 2,000 streams
 * encoded ~1,740 responses for 755 distinct ones, and the collector took a
 * third of the main thread). So a response is held strongly for the push
 * that uses it: from its first encode until the pipeline has been idle for a
 * grace period (every due write flushed), or until a newer change starts a
 * push (its responses carry a new version: the old ones are not asked for
 * again). After that it is held weakly: a stream that still holds the Buffer
 * in its transport keeps it shareable, and memory follows what is in flight.
 * A byte budget bounds what one push may pin; past it, responses are held
 * weakly only, as before.
 */
import type { SharedResponses } from './session.js';

/** What one push may hold strongly by default: 1,000 distinct 256 KB responses (past it: weakly, as before). */
export const DEFAULT_PIN_BYTES = 256 * 1024 * 1024;
/** How long the pipeline stays idle before the pins go (streams still connecting reuse them meanwhile). */
export const DEFAULT_GRACE_MS = 1000;

let encodes = 0;

/** Responses encoded so far (each `set` follows one encode): tests check encodes per push = distinct responses. */
export function sharedEncodeCount(): number {
  return encodes;
}

export class PushResponses implements SharedResponses {
  private readonly weak = new Map<string, WeakRef<Buffer>>();
  private readonly gone = new FinalizationRegistry<string>((key) => {
    // Only if the entry was not replaced by a newer Buffer under the same key.
    if (this.weak.get(key)?.deref() === undefined) this.weak.delete(key);
  });
  /** Held strongly for the push in progress. */
  private pinned = new Map<string, Buffer>();
  private pinnedBytes = 0;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly maxPinnedBytes = DEFAULT_PIN_BYTES,
    private readonly graceMs = DEFAULT_GRACE_MS,
  ) {}

  get(key: string): Buffer | undefined {
    const held = this.pinned.get(key);
    if (held) {
      this.busy();
      return held;
    }
    const b = this.weak.get(key)?.deref();
    if (b) {
      this.busy();
      this.pin(key, b);
    }
    return b;
  }

  set(key: string, bytes: Buffer): void {
    encodes++;
    this.busy();
    this.weak.set(key, new WeakRef(bytes));
    this.gone.register(bytes, key);
    this.pin(key, bytes);
  }

  /** A newer change starts a push: what the last one pinned is held weakly from now on. */
  newPush(): void {
    this.unpin();
  }

  /** Every write has gone out: the pins go after the grace period, unless the pipeline is busy again by then. */
  idle(): void {
    if (this.pinned.size === 0 || this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.unpin();
    }, this.graceMs);
    this.timer.unref();
  }

  /** Keys whose Buffer may still be alive (tests, debug). */
  get size(): number {
    return this.weak.size;
  }

  /** Bytes held strongly for the push in progress (tests, debug). */
  get pinnedSize(): number {
    return this.pinnedBytes;
  }

  private pin(key: string, bytes: Buffer): void {
    if (this.pinnedBytes + bytes.length > this.maxPinnedBytes || this.pinned.has(key)) return;
    this.pinned.set(key, bytes);
    this.pinnedBytes += bytes.length;
  }

  private unpin(): void {
    this.busy();
    this.pinned = new Map();
    this.pinnedBytes = 0;
  }

  private busy(): void {
    if (!this.timer) return;
    clearTimeout(this.timer);
    this.timer = undefined;
  }
}
