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
 * taken its place. A push's responses carry each stream's own nonce, so no
 * stream connecting later asks for them: once the pipeline has been idle for
 * a grace period (streams still connecting reuse them meanwhile) they are
 * held weakly, reused if still alive, never kept alive.
 *
 * Answers to streams' own requests are what the next stream to connect in
 * the same state asks for again (the same version, resources and nonce): they
 * stay held, within their budget, until a change starts a push (the version
 * they carry is then no longer current, or soon will not be). A fleet that
 * reconnects to a quiet mesh, however long after it first connected, is
 * answered with no new encoding: a profile of 2,000 streams reconnecting once
 * the pins had gone spent ~130 ms of the main thread re-encoding 755 responses
 * and more collecting them.
 */
import type { SharedResponses } from './session.js';

/** What a push holds strongly by default: the responses of the last 128 groups at 256 KB each. */
export const DEFAULT_PIN_BYTES = 32 * 1024 * 1024;
/**
 * What answers to streams' own requests may hold strongly by default: streams connecting arrive in no
 * order (a reconnect storm asks for every distinct response at once), so up to 1,000 of 256 KB.
 */
export const DEFAULT_ANSWER_PIN_BYTES = 256 * 1024 * 1024;
/** How long the pipeline stays idle before a push's pins go (streams still connecting reuse them meanwhile). */
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
  /** Held strongly for pushes: the responses used last, in the order of their last use. */
  private readonly pushed: Pins;
  /** Held strongly for answers to streams' own requests, until a change starts a push. */
  private readonly answered: Pins;
  private timer: NodeJS.Timeout | undefined;

  /** The same cache, holding within the answers' budget (the pipeline hands it to the answers' path). */
  readonly answers: SharedResponses;

  constructor(
    maxPinnedBytes = DEFAULT_PIN_BYTES,
    private readonly graceMs = DEFAULT_GRACE_MS,
    maxAnswerBytes = Math.max(maxPinnedBytes, DEFAULT_ANSWER_PIN_BYTES),
  ) {
    this.pushed = new Pins(maxPinnedBytes);
    this.answered = new Pins(maxAnswerBytes);
    this.answers = { get: (k) => this.lookup(k, this.answered), set: (k, b) => this.keep(k, b, this.answered) };
  }

  get(key: string): Buffer | undefined {
    return this.lookup(key, this.pushed);
  }

  set(key: string, bytes: Buffer): void {
    this.keep(key, bytes, this.pushed);
  }

  private lookup(key: string, pins: Pins): Buffer | undefined {
    const b = this.pushed.get(key) ?? this.answered.get(key) ?? this.weak.get(key)?.deref();
    if (b) {
      this.busy();
      pins.pin(key, b);
    }
    return b;
  }

  private keep(key: string, bytes: Buffer, pins: Pins): void {
    encodes++;
    this.busy();
    this.weak.set(key, new WeakRef(bytes));
    this.gone.register(bytes, key);
    pins.pin(key, bytes);
  }

  /** A newer change starts a push: what was pinned (the last push's, the answers') is held weakly from now on. */
  newPush(): void {
    this.busy();
    this.pushed.clear();
    this.answered.clear();
  }

  /** Every write has gone out: a push's pins go after the grace period, unless the pipeline is busy again by then. */
  idle(): void {
    if (this.pushed.size === 0 || this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.pushed.clear();
    }, this.graceMs);
    this.timer.unref();
  }

  /** Keys whose Buffer may still be alive (tests, debug). */
  get size(): number {
    return this.weak.size;
  }

  /** Bytes held strongly, for pushes and answers (tests, debug). */
  get pinnedSize(): number {
    return this.pushed.bytes + this.answered.bytes;
  }

  /** Bytes held strongly for answers to streams' own requests (tests, debug). */
  get answerPinnedSize(): number {
    return this.answered.bytes;
  }

  private busy(): void {
    if (!this.timer) return;
    clearTimeout(this.timer);
    this.timer = undefined;
  }
}

/** Responses held strongly within a byte budget: most recently used last, the least recently used go first. */
class Pins {
  private held = new Map<string, Buffer>();
  bytes = 0;

  constructor(private readonly budget: number) {}

  get size(): number {
    return this.held.size;
  }

  get(key: string): Buffer | undefined {
    return this.held.get(key);
  }

  pin(key: string, bytes: Buffer): void {
    const held = this.held.get(key);
    if (held) {
      this.held.delete(key);
      this.held.set(key, held);
    } else if (bytes.length <= this.budget) {
      this.held.set(key, bytes);
      this.bytes += bytes.length;
    }
    for (const [k, b] of this.held) {
      if (this.bytes <= this.budget) break;
      this.held.delete(k);
      this.bytes -= b.length;
    }
  }

  clear(): void {
    this.held = new Map();
    this.bytes = 0;
  }
}
