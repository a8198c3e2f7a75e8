/**
 * Figures as a reviewer reads them: the median of at least five runs with
 * its spread (min–max), each at two significant figures.
 */
import { median } from './data.js';

export interface Spread {
  /** At two significant figures, as printed. */
  readonly median: number;
  /** The median unrounded: what a goal is decided on (1,040 ms prints as 1,000 but misses "≤ 1 s"). */
  readonly exact?: number;
  readonly min: number;
  readonly max: number;
  readonly runs: number;
}

export const MIN_RUNS = 5;

export function spread(samples: readonly number[]): Spread {
  if (samples.length === 0) return { median: NaN, min: NaN, max: NaN, runs: 0 };
  const m = median(samples);
  return {
    median: sig2(m),
    exact: m,
    min: sig2(Math.min(...samples)),
    max: sig2(Math.max(...samples)),
    runs: samples.length,
  };
}

/** The figure a goal is decided on: the unrounded median when the spread has it. */
export function decided(s: Spread): number {
  return s.exact ?? s.median;
}

/** Two significant figures (12345 → 12000, 0.01234 → 0.012). */
export function sig2(x: number): number {
  if (!Number.isFinite(x) || x === 0) return x;
  return Number(x.toPrecision(2));
}

/** "12 (11–13)": the median, then the spread of the runs. */
export function show(s: Spread): string {
  return s.runs === 0 ? '—' : `${s.median} (${s.min}–${s.max})`;
}

/** The ratio of two medians, at two significant figures. */
export function ratio(a: Spread, b: Spread): number {
  return sig2(a.median / b.median);
}
