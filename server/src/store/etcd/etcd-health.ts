/**
 * The etcd store's readiness, and etcd's failures as the errors a client is
 * answered with.
 *
 * Readiness needs both the watch stream and a quorum: a watch stays connected
 * to a member that lost quorum, but such a member cannot serve a
 * linearizable read (nor commit a write). So a read is probed once a second,
 * and the store is ready while the watch is up and the last probe answered.
 */
import { CanopyError } from '../../domain/errors.js';

/** How often readiness is checked with a linearizable read. */
const PROBE_MS = 1000;

export class EtcdHealth {
  private watchUp = true;
  private readOk = true;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  healthy = true;

  constructor(
    /** A linearizable read: resolves while etcd has a quorum for this replica. */
    private readonly probe: () => Promise<unknown>,
    private readonly onChange: (healthy: boolean) => void,
  ) {}

  /** Probes now and then every PROBE_MS until stopped. */
  start(): void {
    if (this.stopped) return;
    this.probe()
      .then(
        () => true,
        () => false,
      )
      .then((ok) => {
        this.readOk = ok;
        this.set(ok && this.watchUp);
        if (this.stopped) return;
        this.timer = setTimeout(() => this.start(), PROBE_MS);
        this.timer.unref();
      });
  }

  /** The watch stream went down or came back. */
  watch(up: boolean): void {
    this.watchUp = up;
    this.set(up && this.readOk);
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  private set(healthy: boolean): void {
    if (this.healthy === healthy) return;
    this.healthy = healthy;
    this.onChange(healthy);
  }
}

/** etcd's own failures (down, no leader, timeouts) are a store that cannot be reached: 503, not a bug. */
export function unreachable(err: unknown): never {
  if (err instanceof CanopyError) throw err;
  throw new CanopyError('CANOPY_NOT_READY', `the store (etcd) cannot be written: ${(err as Error).message}`);
}
