/**
 * When a push goes out after a change: at once on a quiet mesh (the leading edge), or after the debounce
 * within a burst (the trailing edge, merged). A single flip then waits for nothing, and a storm of changes
 * still makes few pushes: the first change goes alone, the rest of the burst is merged into one push once
 * `debounceMs` pass without a change, never held back more than `maxDelayMs` by a steady stream of them.
 * A deletion never leads (DebounceState.mayLead).
 */

/** The debounce's view of the pipeline when a change arrives. */
export interface DebounceState {
  /** When the oldest change not yet pushed arrived (this change's time when it is the only one). */
  readonly firstChangeAt: number;
  /** When the last push went out; undefined before the first. */
  readonly lastPushAt: number | undefined;
  /** A leading-edge push is already due (its timer has not fired yet): this change joins it. */
  readonly leadingDue: boolean;
  /**
   * This change may lead. A deletion may not: it is often the first half of a replace (delete, then
   * re-create), and merged with the re-creation the clients never see the service missing.
   */
  readonly mayLead: boolean;
}

/**
 * Milliseconds to wait before pushing, for a change arriving at `now` (0: as soon as this turn of the event
 * loop ends, so the changes of one turn go together); 'keep': the push already due carries this change too.
 */
export function pushDelay(state: DebounceState, now: number, debounceMs: number, maxDelayMs: number): number | 'keep' {
  if (state.leadingDue && state.mayLead) return 'keep';
  const quiet = state.lastPushAt === undefined || now - state.lastPushAt >= debounceMs;
  if (quiet && state.mayLead && state.firstChangeAt === now) return 0;
  return Math.max(0, Math.min(debounceMs, state.firstChangeAt + maxDelayMs - now));
}
