/** What the peer benchmark (peer.ts) reports: per side and pass, per row, and Canopy ÷ go-control-plane pair by pair. */
import { spread, type Spread } from './stats.js';

/** One pass against one side. Times in ms, CPU in ms, memory in KB, bytes per stream. */
export interface PeerPass {
  readonly initialCpuMs: number;
  /** Canopy: its main thread's; Go has no main thread: its process's (the same as initialCpuMs). */
  readonly initialMainCpuMs: number;
  /** The part of initialCpuMs spent in the kernel (page faults, socket writes), all threads. */
  readonly initialSysCpuMs: number;
  /** Until every stream holds its CLA (the driver's clock, from its start). */
  readonly initialWallMs: number;
  /** Received on one stream's connection in the initial sync (TCP payload), median over streams. */
  readonly initialBytes: number;
  readonly rssKB: number;
  /** VmHWM at the end of the pass (reset at its start). */
  readonly peakKB: number;
  readonly oneCpuMs: number;
  readonly oneMainCpuMs: number;
  readonly oneSysCpuMs: number;
  readonly oneP50Ms: number;
  readonly oneP99Ms: number;
  readonly oneLastMs: number;
  readonly oneBytes: number;
  readonly oneMissing: number;
  readonly windowCpuPerS: number;
  readonly windowP99Ms: number;
  /** Deliveries (flip × stream) slower than the 1 s between flips. */
  readonly windowLate: number;
  readonly windowMissing: number;
  readonly windowBytesPerS: number;
  /**
   * Every stream reconnects to the warm server (the pass's driver gone, a new one with the same nodes):
   * server CPU and wall time until every stream holds its CLA again.
   */
  readonly resyncCpuMs: number;
  readonly resyncSysCpuMs: number;
  readonly resyncWallMs: number;
  /** The machine's 1-minute load average as the pass began (shared machines: what else ran). */
  readonly load1: number;
}

/** Figure name → median (min–max) over passes. */
export type SideSpread = Record<keyof PeerPass | 'rssPerStreamKB' | 'peakPerStreamKB', Spread>;

export interface PeerRow {
  readonly streams: number;
  /** The go-control-plane peer's mode this row compares Canopy with (the same Canopy passes in both rows). */
  readonly peer: 'protos' | 'encoded';
  /** SotW rows have every figure; delta rows the initial sync and one flip (no window). */
  readonly protocol: 'sotw' | 'delta';
  readonly canopy: SideSpread;
  readonly go: SideSpread;
  /** Canopy ÷ go-control-plane pair by pair, per figure. */
  readonly ratios: Partial<Record<keyof SideSpread, Spread>>;
  /** The 1-flip p99 ratio with Canopy's debounce (`canopy serve`'s default, 100 ms) taken off its side. */
  readonly oneP99LessDebounce: Spread;
  /** Client localities whose CLAs were checked equal in every pair. */
  readonly checkedLocalities: number;
}

export interface PeerFigures {
  readonly endpoints: number;
  readonly localities: number;
  readonly pairs: number;
  readonly windowS: number;
  readonly go: string;
  readonly rows: readonly PeerRow[];
}

/**
 * Figures shown with their ratio to say where the CPU went, not goals of their own: the main thread's share
 * and the kernel's share of a CPU figure that is one.
 */
export const SHARE_FIGURES: ReadonlySet<string> = new Set([
  'initialMainCpuMs',
  'initialSysCpuMs',
  'resyncSysCpuMs',
  'oneMainCpuMs',
  'oneSysCpuMs',
]);

/** The figures set as ratios (lower is better for Canopy on each). */
export const RATIO_FIGURES = [
  'initialCpuMs',
  'initialMainCpuMs',
  'initialSysCpuMs',
  'initialWallMs',
  'resyncCpuMs',
  'resyncSysCpuMs',
  'resyncWallMs',
  'oneCpuMs',
  'oneMainCpuMs',
  'oneSysCpuMs',
  'oneP50Ms',
  'oneP99Ms',
  'oneLastMs',
  'windowCpuPerS',
  'windowP99Ms',
  'rssPerStreamKB',
  'peakPerStreamKB',
  'initialBytes',
  'oneBytes',
] as const;

type Derived = PeerPass & { rssPerStreamKB: number; peakPerStreamKB: number };

function derive(p: PeerPass, rss0KB: number, streams: number): Derived {
  return { ...p, rssPerStreamKB: (p.rssKB - rss0KB) / streams, peakPerStreamKB: (p.peakKB - rss0KB) / streams };
}

function sideSpread(passes: readonly Derived[]): SideSpread {
  const keys = Object.keys(passes[0]!) as (keyof Derived)[];
  return Object.fromEntries(keys.map((k) => [k, spread(passes.map((p) => p[k]))])) as SideSpread;
}

/** `canopy serve`'s default debounce: a change is pushed this long after it arrives, so that a burst makes one push. */
const DEBOUNCE_MS = 100;

/** /proc counts CPU in 10 ms ticks. */
const floor = (k: string, x: number): number => (k.includes('Cpu') ? Math.max(10, x) : x);

export function peerRow(
  streams: number,
  passes: { canopy: readonly PeerPass[]; go: readonly PeerPass[] },
  rss0: { canopy: number; go: number },
  checkedLocalities: number,
  protocol: 'sotw' | 'delta' = 'sotw',
  peer: PeerRow['peer'] = 'protos',
): PeerRow {
  const c = passes.canopy.map((p) => derive(p, rss0.canopy, streams));
  const g = passes.go.map((p) => derive(p, rss0.go, streams));
  // A figure the row did not measure (a delta row's window) is NaN on every pass: no ratio.
  const measured = RATIO_FIGURES.filter((k) => c.every((p, i) => Number.isFinite(p[k] + g[i]![k])));
  const ratios = Object.fromEntries(
    measured.map((k) => [k, spread(c.map((p, i) => floor(k, p[k]) / floor(k, g[i]![k])))]),
  );
  const oneP99LessDebounce = spread(c.map((p, i) => (p.oneP99Ms - DEBOUNCE_MS) / g[i]!.oneP99Ms));
  return {
    streams,
    peer,
    protocol,
    canopy: sideSpread(c),
    go: sideSpread(g),
    ratios,
    oneP99LessDebounce,
    checkedLocalities,
  };
}
