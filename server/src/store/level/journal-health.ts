/**
 * The embedded store's readiness (local-store.ts): not ready from a failed commit (a full disk) until a write
 * succeeds. While not ready the journal is probed every second, so readiness comes back with free space even if
 * no client writes.
 */
import type { Journal } from '../held-service.js';

/** How often a journal that failed a write is probed. */
const PROBE_MS = 1000;

export class JournalHealth {
  /** False from a failed commit until a write (a client's, or the probe's) succeeds. */
  private healthy = true;
  private probeTimer: NodeJS.Timeout | undefined;

  /**
   * `busy`: a group commit is in flight or the store is closed (the probe then waits its next turn);
   * `changed`: told each change of readiness.
   */
  constructor(
    private readonly journal: Journal | undefined,
    private readonly busy: () => boolean,
    private readonly changed: (healthy: boolean) => void,
  ) {}

  get ready(): boolean {
    return this.healthy;
  }

  set(healthy: boolean): void {
    if (this.healthy === healthy) return;
    this.healthy = healthy;
    clearInterval(this.probeTimer);
    this.probeTimer = undefined;
    const probe = this.journal?.probe?.bind(this.journal);
    if (!healthy && probe) {
      this.probeTimer = setInterval(() => {
        if (this.busy()) return;
        probe().then(
          () => !this.busy() && this.set(true),
          () => {},
        );
      }, PROBE_MS);
      this.probeTimer.unref();
    }
    this.changed(healthy);
  }

  stop(): void {
    clearInterval(this.probeTimer);
  }
}
