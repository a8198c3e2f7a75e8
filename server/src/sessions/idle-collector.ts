/**
 * A full garbage collection once writing stops after a big burst.
 *
 * The transport copies every response it is handed (grpc-js frames each
 * message into a new buffer): a push of 256 KB responses to 2,000 streams
 * leaves 500 MB of copies behind, garbage once flushed. While writing, V8
 * collects them as it goes; once writing stops nothing allocates on the JS
 * heap, the collection it has started never finishes, and the process keeps
 * hundreds of MB in RSS until the next burst (measured: LEDS at 300 streams
 * held 580 MB of array buffers 3 s after its initial sync, 1 MB after one
 * collection). So the pipeline calls `collect` once it has been idle for
 * `idleMs` after `afterBytes` or more were written since the last one: one
 * collection per burst, none for small pushes, none while a burst goes on.
 */
import { DEFAULT_GRACE_MS } from './shared-responses.js';

/**
 * Idle this long before the collection: past the shared responses' grace
 * period, so the responses a burst pinned are let go and collected with the copies.
 */
export const DEFAULT_COLLECT_IDLE_MS = DEFAULT_GRACE_MS + 200;

/** What a burst must have written for a collection after it. */
export const DEFAULT_COLLECT_AFTER_BYTES = 64 * 1024 * 1024;

/** Runs `collect` once writing has stopped for `idleMs` after `afterBytes` or more were written. */
export class IdleCollector {
  private written = 0;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly collect: () => void,
    private readonly afterBytes: number,
    private readonly idleMs: number,
  ) {}

  wrote(bytes: number): void {
    this.written += bytes;
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
  }

  idle(): void {
    if (this.written < this.afterBytes || this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.written = 0;
      this.collect();
    }, this.idleMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }
}
