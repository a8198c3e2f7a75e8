/**
 * Stability for load-aware weights: reports are smoothed before they count,
 * a new target moves the weights only past a dead band and by a bounded step
 * each interval, and a locality that is mostly unhealthy drains with
 * hysteresis. Pure: every call gets the previous state and returns the next.
 */

export interface DampingOptions {
  /**
   * Relative: while every share is within this fraction of its target (0.08: 8%), the weights stay as they
   * are, so the noise of measured load does not move them.
   */
  readonly deadBand: number;
  /**
   * Absolute: a share that moves by no more than this (0.02: 2% of the node's load) is inside the band however
   * small it is. Without it a tiny share is all noise: a node offering exactly what its nearer tiers hold
   * would send a far locality 0.1% one interval and nothing the next, a change each time.
   */
  readonly absBand: number;
  /** The most any one share (0..1) moves in one interval. */
  readonly maxStep: number;
}

export const DEFAULT_DAMPING: DampingOptions = { deadBand: 0.08, absBand: 0.02, maxStep: 0.35 };

/** Exponentially weighted moving average of a rate (`alpha`: a new report's weight); the first report is taken as it is. */
export function smooth(previous: number | undefined, report: number, alpha: number): number {
  if (!Number.isFinite(report) || report < 0) return previous ?? 0;
  return previous === undefined ? report : previous + alpha * (report - previous);
}

/** Shares (summing to 1) of a weight map. */
export function sharesOf(weights: ReadonlyMap<string, number>): Map<string, number> {
  let total = 0;
  for (const v of weights.values()) total += Math.max(0, v);
  const out = new Map<string, number>();
  if (total <= 0) return out;
  for (const [k, v] of weights) if (v > 0) out.set(k, v / total);
  return out;
}

/**
 * The shares to send this interval: the current ones while the target is
 * within the dead band of them; otherwise a step along the straight line to
 * the target, short enough that no share moves by more than `maxStep`. The
 * step keeps the shares' proportions on the way (no locality gets ahead of a
 * nearer one), and a spill that is no longer needed drains back over several
 * intervals instead of at once.
 *
 * The band applies to each share, not only to whether anything moves: when one
 * share moves, a share within the band of its target keeps its value, and a
 * locality not yet used is not added for a share inside the band (a near zone
 * moving for another reason would otherwise bring a far one in at 1%, to leave
 * it again the next interval).
 */
export function dampShares(
  current: ReadonlyMap<string, number> | undefined,
  target: ReadonlyMap<string, number>,
  opts: DampingOptions = DEFAULT_DAMPING,
): Map<string, number> {
  if (!current || current.size === 0) return new Map(target);
  const keys = new Set([...current.keys(), ...target.keys()]);
  const aim = new Map<string, number>();
  let inBand = true;
  for (const k of keys) {
    const t = target.get(k) ?? 0;
    const c = current.get(k) ?? 0;
    // A locality to be left entirely moves, even from inside the band: a spill that is no longer needed ends,
    // rather than lingering at a few percent.
    const leaving = t === 0 && c > 0;
    const moves = leaving || Math.abs(t - c) > Math.max(opts.deadBand * Math.max(t, c), opts.absBand);
    if (moves) inBand = false;
    aim.set(k, moves ? t : c);
  }
  if (inBand) return new Map(current);
  // What the held shares keep is taken from (or given to) the moving ones in proportion.
  const goal = sharesOf(aim);
  if (goal.size === 0) return new Map(target);
  let largest = 0;
  for (const k of keys) largest = Math.max(largest, Math.abs((goal.get(k) ?? 0) - (current.get(k) ?? 0)));
  const lambda = largest > 0 ? Math.min(1, opts.maxStep / largest) : 1;
  const moved = new Map<string, number>();
  for (const k of keys) {
    const c = current.get(k) ?? 0;
    const v = c + lambda * ((goal.get(k) ?? 0) - c);
    if (v > 1e-6) moved.set(k, v);
  }
  return sharesOf(moved);
}

export interface DrainOptions {
  /** Below this healthy fraction a locality takes no new traffic. */
  readonly threshold: number;
  /** It takes traffic again only above threshold + hysteresis. */
  readonly hysteresis: number;
}

export const DEFAULT_DRAIN: DrainOptions = { threshold: 0.25, hysteresis: 0.1 };

/** Auto capacity drain: whether a locality is drained after this interval. */
export function drained(healthyFraction: number, wasDrained: boolean, opts: DrainOptions = DEFAULT_DRAIN): boolean {
  return wasDrained ? healthyFraction < opts.threshold + opts.hysteresis : healthyFraction < opts.threshold;
}
