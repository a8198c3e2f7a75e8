/** What the server macro run (server.ts) reports: per side, per burst, and Canopy over bare pair by pair. */
import type { Spread } from './stats.js';

export interface BurstFigures {
  readonly changes: number;
  /** Over every stream of every pass. */
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
  /** Each pass's p99, median (min–max) over the passes. */
  readonly p99PerPass: Spread;
  /** Server CPU from the change until every stream settled, per pass. */
  readonly cpuMs: Spread;
  /** The same, the main thread's alone (server-procs.ts mainCpuMs). */
  readonly mainCpuMs: Spread;
  /** Responses each stream received in one burst: median (min–max) over every stream and pass. */
  readonly pushesPerStream: Spread;
  /** Bytes each stream received in one burst, the same way. */
  readonly bytesPerStream: Spread;
  /** Peak RSS (VmHWM) during the burst over the server's RSS before any stream, per stream; highest pass. */
  readonly peakRssPerStreamKB: number;
}

export interface SideFigures {
  /** Server CPU from the clients' start until every stream holds its first response, ACKed; per pass. */
  readonly initialCpuMs: Spread;
  /** The same, the main thread's alone. */
  readonly initialMainCpuMs: Spread;
  readonly initialWallMs: Spread;
  /** RSS once every stream is connected, over the server's RSS before any stream, per stream; per pass. */
  readonly rssPerStreamKB: Spread;
  readonly bursts: readonly BurstFigures[];
}

/** Canopy over bare, pass by pass (each pair run back to back): median (min–max) of the pairs. */
export interface PairRatios {
  readonly initialCpu: Spread;
  /** The same, main thread against main thread: the rest of a process's CPU is its background threads. */
  readonly initialMainCpu: Spread;
  /**
   * Per burst size: p99 to the last response, the same with Canopy's debounce taken off its side (the
   * push starts `DEBOUNCE_MS` after the change, a wait the bare writer does not have), and server CPU.
   */
  readonly bursts: readonly {
    readonly changes: number;
    readonly p99: Spread;
    readonly p99LessDebounce: Spread;
    readonly cpu: Spread;
    readonly mainCpu: Spread;
  }[];
}

/** Canopy's shared encodes in a push against the distinct responses the bare writer holds for the same streams. */
export interface EncodeCount {
  /** Canopy's pushes per stream in the burst (median over streams and passes); 1 for the initial sync. */
  readonly pushes: number;
  /** Pair by pair: [Canopy's encodes, the bare writer's distinct responses]. */
  readonly pairs: readonly (readonly [number, number])[];
}

export interface ProtocolFigures {
  readonly canopy: SideFigures;
  readonly bare: SideFigures;
  readonly ratios: PairRatios;
  readonly pairs: number;
  /** SotW: encodes per push against distinct responses, for the initial sync and each burst size. */
  readonly encodes?: { readonly initial: EncodeCount; readonly bursts: readonly (EncodeCount & { changes: number })[] };
}

export interface ServerFigures {
  readonly streams: number;
  readonly endpoints: number;
  readonly localities: number;
  /** Interleaved passes per side (Canopy, bare, Canopy, …). */
  readonly pairs: number;
  /** Canopy's push window, when the run set one. */
  readonly pushWindow?: number;
  /** glibc's mmap threshold both servers ran with, when the run set one. */
  readonly mallocMmapThreshold?: number;
  /** V8's heap growth (%) both servers ran with (server/src/platform/heap-growth.ts; 0: V8's own factor). */
  readonly heapGrowth?: number;
  /** One client's SotW CLA (in failover mode every CLA holds every healthy endpoint). */
  readonly claBytes: number;
  readonly sotw?: ProtocolFigures | { skipped: string };
  readonly leds?: ProtocolFigures | { skipped: string };
}
