/**
 * The push window: at most `size` streams have a response in the transport
 * (written, not yet flushed) at once; the others wait and start as slots
 * free, so memory stays flat whatever the number of streams.
 *
 * Streams wait by response: those whose next response is the same bytes
 * (the same `group`, their share key) wait together, and a group is let
 * through whole before the next one starts. A push (or thousands of streams
 * connecting at once) then writes each distinct response to all its streams
 * back to back, and the encoded bytes are needed only while their group is
 * going out: the shared-responses cache holds a few groups' responses, not
 * every distinct one for the whole push (shared-responses.ts).
 */

/** What the window keeps on each stream. */
export interface WindowMember {
  /** Holds a slot until its push is flushed (or the stream closes, or the slot times out). */
  slot: NodeJS.Timeout | undefined;
  /** Waiting for a slot. */
  queued: boolean;
  closed: boolean;
  /** Streams with the same group get the same bytes (a hint: a wrong one costs an encode, never a wrong byte). */
  readonly group: () => string;
}

export class PushWindow<M extends WindowMember> {
  private inFlight = 0;
  /** Waiting streams by group, groups in the order their first stream started waiting. */
  private readonly waiting = new Map<string, M[]>();
  private waitingCount = 0;
  private waking = false;

  /**
   * `size` 0 turns the window off; `wake` carries on a stream let through
   * (it takes its slot with `take`, or gives nothing back if it has nothing to write).
   */
  constructor(
    private readonly size: number,
    private readonly timeoutMs: number,
    private readonly wake: (m: M) => void,
  ) {}

  /** Streams holding a slot (at most `size`). */
  get held(): number {
    return this.inFlight;
  }

  /** No slot held and nobody waiting. */
  get idle(): boolean {
    return this.inFlight === 0 && this.waitingCount === 0;
  }

  /** True when the stream may write now: it holds a slot, takes a free one, or the window is off; else it waits. */
  take(m: M): boolean {
    if (this.size === 0 || m.slot !== undefined) return true;
    if (this.inFlight >= this.size) {
      if (!m.queued) this.enqueue(m);
      return false;
    }
    this.inFlight++;
    m.slot = setTimeout(() => this.release(m), this.timeoutMs);
    m.slot.unref();
    return true;
  }

  /** The stream's push went out (or it closed, or its slot timed out): the slot goes to the next stream waiting. */
  release(m: M): void {
    if (m.slot === undefined) return;
    clearTimeout(m.slot);
    m.slot = undefined;
    this.inFlight--;
    // Not re-entered: a stream woken here that has nothing to push releases at once, and this loop goes on.
    if (this.waking) return;
    this.waking = true;
    try {
      for (let next = this.shift(); next; next = this.inFlight < this.size ? this.shift() : undefined) {
        if (!next.closed) this.wake(next);
      }
    } finally {
      this.waking = false;
    }
  }

  private enqueue(m: M): void {
    m.queued = true;
    const g = m.group();
    const list = this.waiting.get(g);
    if (list) list.push(m);
    else this.waiting.set(g, [m]);
    this.waitingCount++;
  }

  /** Takes the first stream waiting off the queue (it takes its slot when woken). */
  private shift(): M | undefined {
    for (const [g, list] of this.waiting) {
      const m = list.shift();
      if (list.length === 0) this.waiting.delete(g);
      if (!m) continue;
      this.waitingCount--;
      m.queued = false;
      return m;
    }
    return undefined;
  }
}
