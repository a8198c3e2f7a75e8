/**
 * How streams coming and going are logged: each open and close at debug (node, peer, locality), and at
 * info one summary line per period in which any did, `xds streams` with how many opened and closed and
 * how many are open. A line per stream at info cost ~120 ms of the event loop per 2,000 reconnecting
 * streams (pino writing each to the pipe) and buried everything else when a fleet reconnected; an
 * operator still sees churn at info, and `--log-level debug` names each stream.
 */
import type { XdsLog } from './stream-sink.js';

/** The summary's period: one info line at most this often while streams churn. */
export const STREAM_SUMMARY_MS = 10_000;

export class StreamLog {
  private opened = 0;
  private closed = 0;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly log: XdsLog,
    /** Streams open now, read when the summary is written. */
    private readonly open: () => number,
    private readonly periodMs = STREAM_SUMMARY_MS,
  ) {}

  streamOpened(fields: object): void {
    this.opened++;
    this.log.debug(fields, 'xds stream opened');
    this.schedule();
  }

  streamClosed(fields: object): void {
    this.closed++;
    this.log.debug(fields, 'xds stream closed');
    this.schedule();
  }

  /** Writes the pending summary now, if there is one (the period's end, shutdown). */
  summarise(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    if (this.opened === 0 && this.closed === 0) return;
    this.log.info({ opened: this.opened, closed: this.closed, open: this.open() }, 'xds streams');
    this.opened = this.closed = 0;
  }

  private schedule(): void {
    if (this.timer) return;
    this.timer = setTimeout(() => this.summarise(), this.periodMs);
    this.timer.unref();
  }
}
