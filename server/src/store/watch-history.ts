/**
 * The recent events a store keeps so that a watch may start from an earlier
 * revision: both backends record what they commit here and replay from it.
 */
import type { StoreEvent, WatchHandlers } from './store.js';
import { CodedError } from '../domain/errors.js';

/** How many events are kept for late watchers. */
const HISTORY = 4096;

export class WatchHistory {
  private readonly events: StoreEvent[] = [];

  record(events: readonly StoreEvent[]): void {
    this.events.push(...events);
    if (this.events.length > HISTORY) this.events.splice(0, this.events.length - HISTORY);
  }

  /** Forgets every event: older revisions cannot be replayed across a gap. */
  clear(): void {
    this.events.length = 0;
  }

  /**
   * Hands `handlers` the events after `fromRevision`, given the store is at
   * `current`; throws when some of them are no longer kept (list again).
   */
  replay(fromRevision: number, current: number, handlers: WatchHandlers): void {
    const oldest = this.events[0]?.revision ?? current + 1;
    if (fromRevision < current && fromRevision + 1 < oldest) {
      throw new CodedError(
        'CANOPY_STORE_COMPACTED',
        `revision ${fromRevision} is older than the watch history (from ${oldest}); list again`,
      );
    }
    const missed = this.events.filter((e) => e.revision > fromRevision);
    if (missed.length > 0) handlers.onEvents(missed);
  }
}
