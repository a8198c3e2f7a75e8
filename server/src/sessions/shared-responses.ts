/**
 * Encoded responses shared by every stream that needs the same bytes, on the
 * initial path as well as on pushes: a response is materialized once and the
 * same Buffer handed to each stream's transport.
 *
 * Held only weakly, a 256 KB response is collected between two of its
 * streams and encoded again (a flip to 2,000 streams once encoded ~1,740
 * responses for 755 distinct ones, and the collector took a third of the main
 * thread). Held strongly for a whole push, every distinct response is alive
 * at once (755 × 256 KB, about 100 KB per stream at 2,000 streams). So the
 * push window lets the streams that get the same bytes through back to back
 * (push-window.ts), and this cache holds strongly only the responses used
 * last, within a byte budget (least recently used go first): a group's
 * response stays while its streams go out and goes once later groups have
 * taken its place. Past the budget, and once the pipeline has been idle for a
 * grace period (streams still connecting reuse them meanwhile) or a newer
 * change starts a push (its responses carry a new version), a response is
 * held weakly: reused if still alive, never kept alive.
 */
import type { SharedResponses } from './session.js';

/** What a push holds strongly by default: the responses of the last 128 groups at 256 KB each. */
export const DEFAULT_PIN_BYTES = 32 * 1024 * 1024;
/**
 * What answers to streams' own requests may hold strongly by default: streams connecting arrive in no
 * order (a reconnect storm asks for every distinct response at once), so up to 1,000 of 256 KB.
 */
export const DEFAULT_ANSWER_PIN_BYTES = 256 * 1024 * 1024;
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
  /** Held strongly: the responses used last, in the order of their last use. */
  private pinned = new Map<string, Buffer>();
  private pinnedBytes = 0;
  private timer: NodeJS.Timeout | undefined;

  /** The same cache, holding within the answers' budget (the pipeline hands it to the answers' path). */
  readonly answers: SharedResponses;

  constructor(
    private readonly maxPinnedBytes = DEFAULT_PIN_BYTES,
    private readonly graceMs = DEFAULT_GRACE_MS,
    maxAnswerBytes = Math.max(maxPinnedBytes, DEFAULT_ANSWER_PIN_BYTES),
  ) {
    this.answers = { get: (k) => this.lookup(k, maxAnswerBytes), set: (k, b) => this.keep(k, b, maxAnswerBytes) };
  }

  get(key: string): Buffer | undefined {
    return this.lookup(key, this.maxPinnedBytes);
  }

  set(key: string, bytes: Buffer): void {
    this.keep(key, bytes, this.maxPinnedBytes);
  }

  private lookup(key: string, budget: number): Buffer | undefined {
    const b = this.pinned.get(key) ?? this.weak.get(key)?.deref();
    if (b) {
      this.busy();
      this.pin(key, b, budget);
    }
    return b;
  }

  private keep(key: string, bytes: Buffer, budget: number): void {
    encodes++;
    this.busy();
    this.weak.set(key, new WeakRef(bytes));
    this.gone.register(bytes, key);
    this.pin(key, bytes, budget);
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

  /** Most recently used last; the least recently used go first past the budget. */
  private pin(key: string, bytes: Buffer, budget: number): void {
    const held = this.pinned.get(key);
    if (held) {
      this.pinned.delete(key);
      this.pinned.set(key, held);
    } else if (bytes.length <= budget) {
      this.pinned.set(key, bytes);
      this.pinnedBytes += bytes.length;
    }
    for (const [k, b] of this.pinned) {
      if (this.pinnedBytes <= budget) break;
      this.pinned.delete(k);
      this.pinnedBytes -= b.length;
    }
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
