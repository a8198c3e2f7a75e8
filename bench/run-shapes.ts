/** What the in-process sections of `npm run bench` (run.ts) run: their shapes, full and --quick. */
import type { Shape } from './cla.js';

/** 1. CLA generation: one factor at a time around the goal shape. */
export function claShapes(quick: boolean): Shape[] {
  if (quick) {
    return [
      { endpoints: 1000, clients: 100, localities: 10 },
      { endpoints: 1000, clients: 1000, localities: 100 },
      { endpoints: 10000, clients: 1000, localities: 100 },
      { endpoints: 10000, clients: 10000, localities: 100 },
    ];
  }
  // One factor at a time around 10k endpoints × 1k clients × 100 localities, then the goal shape.
  return [
    { endpoints: 1000, clients: 1000, localities: 100 },
    { endpoints: 10000, clients: 1000, localities: 100 },
    { endpoints: 100000, clients: 1000, localities: 100 },
    { endpoints: 10000, clients: 100, localities: 100 },
    { endpoints: 10000, clients: 10000, localities: 100 },
    { endpoints: 10000, clients: 1000, localities: 10 },
    { endpoints: 10000, clients: 1000, localities: 1000 },
    { endpoints: 10000, clients: 10000, localities: 1000 },
  ];
}

/** 1b. CLA work against the memoized baselines. */
export function memoizedShapes(quick: boolean): Shape[] {
  return quick
    ? [
        { endpoints: 1000, clients: 1000, localities: 100 },
        { endpoints: 1000, clients: 1000, localities: 1000 },
      ]
    : [
        { endpoints: 10000, clients: 2000, localities: 100 },
        { endpoints: 10000, clients: 2000, localities: 1000 },
      ];
}

/** 3/4. Fan-out: streams and the service's endpoints. */
export function fanoutRuns(quick: boolean): { streams: number; endpoints: number }[] {
  return quick
    ? [
        { streams: 100, endpoints: 1000 },
        { streams: 1000, endpoints: 1000 },
      ]
    : [
        { streams: 100, endpoints: 1000 },
        { streams: 1000, endpoints: 1000 },
        { streams: 5000, endpoints: 1000 },
        { streams: 5000, endpoints: 100 },
        // The knee: per-stream cost from 1,000 to 10,000 streams (every full GC marks every stream's state).
        { streams: 10000, endpoints: 1000 },
      ];
}
