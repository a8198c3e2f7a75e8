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
 * taken its place.
 *
 * A response's nonce is made from its content (wire-nonce.ts), so the
 * responses of a push are what streams connecting later at the same state ask
 * for too (the same version, resources and nonce), and so are the answers to
 * streams' own requests. Both stay held, within the answers' budget, until a
 * change touches what they carry (their type and names; the rest stays held
 * across the push): a fleet that reconnects after a flip, or to a quiet mesh
 * however long after it first connected, is answered with no new encoding (a
 * warm re-sync of 2,000 streams after a flip once encoded the 755 responses of
 * the push again, ~130 ms of the main thread and more collecting them). What
 * this holds settled is the state's distinct responses: the initial sync held
 * as much before.
 */
import type { SharedResponses, SharedScope, TouchedNames } from './session.js';

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
  /** Held strongly for streams at the current state (answers and pushes), until a change touches them. */
  private readonly answered: Pins;
  private timer: NodeJS.Timeout | undefined;

  /** The same cache, holding within the answers' budget (the pipeline hands it to the answers' path). */
  readonly answers: SharedResponses;

  constructor(
    maxPinnedBytes = DEFAULT_PIN_BYTES,
    private readonly graceMs = DEFAULT_GRACE_MS,
    maxAnswerBytes: number | undefined = undefined,
  ) {
    maxAnswerBytes ??= Math.max(maxPinnedBytes, DEFAULT_ANSWER_PIN_BYTES);
    this.pushed = new Pins(maxPinnedBytes);
    this.answered = new Pins(maxAnswerBytes);
    this.answers = {
      get: (k) => this.lookup(k, false),
      set: (k, b, scope) => this.keep(k, b, false, scope),
    };
  }

  get(key: string): Buffer | undefined {
    return this.lookup(key, true);
  }

  set(key: string, bytes: Buffer, scope?: SharedScope): void {
    this.keep(key, bytes, true, scope);
  }

  private lookup(key: string, push: boolean): Buffer | undefined {
    const b = this.pushed.get(key) ?? this.answered.get(key) ?? this.weak.get(key)?.deref();
    if (b) {
      this.busy();
      if (push) this.pushed.pin(key, b);
      // Held again from a push or weakly: what it carries is not known here, so the next change lets it go.
      this.answered.pin(key, b, this.answered.scope(key));
    }
    return b;
  }

  private keep(key: string, bytes: Buffer, push: boolean, scope: SharedScope | undefined): void {
    encodes++;
    this.busy();
    this.weak.set(key, new WeakRef(bytes));
    this.gone.register(bytes, key);
    if (push) this.pushed.pin(key, bytes);
    this.answered.pin(key, bytes, scope);
  }

  /**
   * A change starts a push: the last push's pins go, and of what is held for the current state what the
   * change touches (all of it without `touched`); those are held weakly from now on.
   */
  newPush(touched?: TouchedNames): void {
    this.busy();
    this.pushed.clear();
    if (touched) this.answered.drop((scope) => scope === undefined || touches(scope, touched));
    else this.answered.clear();
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

  /** Bytes held strongly, for pushes and the current state, each response counted once (tests, debug). */
  get pinnedSize(): number {
    return this.answered.bytes + this.pushed.bytesNotIn(this.answered);
  }

  /** Bytes held strongly for the current state, answers and pushes (tests, debug). */
  get answerPinnedSize(): number {
    return this.answered.bytes;
  }

  private busy(): void {
    if (!this.timer) return;
    clearTimeout(this.timer);
    this.timer = undefined;
  }
}

function touches(scope: SharedScope, touched: TouchedNames): boolean {
  const names = touched.get(scope.typeUrl);
  if (!names || names.size === 0) return false;
  if (!scope.names) return true;
  for (const n of scope.names) if (names.has(n)) return true;
  return false;
}

interface Pinned {
  readonly bytes: Buffer;
  readonly scope: SharedScope | undefined;
}

/** Responses held strongly within a byte budget: most recently used last, the least recently used go first. */
class Pins {
  private held = new Map<string, Pinned>();
  bytes = 0;

  constructor(private readonly budget: number) {}

  get size(): number {
    return this.held.size;
  }

  get(key: string): Buffer | undefined {
    return this.held.get(key)?.bytes;
  }

  scope(key: string): SharedScope | undefined {
    return this.held.get(key)?.scope;
  }

  pin(key: string, bytes: Buffer, scope?: SharedScope): void {
    const held = this.held.get(key);
    if (held) {
      this.held.delete(key);
      this.held.set(key, held);
    } else if (bytes.length <= this.budget) {
      this.held.set(key, { bytes, scope });
      this.bytes += bytes.length;
    }
    for (const [k, p] of this.held) {
      if (this.bytes <= this.budget) break;
      this.held.delete(k);
      this.bytes -= p.bytes.length;
    }
  }

  /** Lets go of the responses whose scope `stale` says so. */
  drop(stale: (scope: SharedScope | undefined) => boolean): void {
    for (const [k, p] of this.held) {
      if (!stale(p.scope)) continue;
      this.held.delete(k);
      this.bytes -= p.bytes.length;
    }
  }

  bytesNotIn(other: Pins): number {
    let n = 0;
    for (const [k, p] of this.held) if (other.get(k) !== p.bytes) n += p.bytes.length;
    return n;
  }

  clear(): void {
    this.held = new Map();
    this.bytes = 0;
  }
}
