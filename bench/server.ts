/**
 * The server macro run (`npm run bench -- --only=server`): `canopy serve` as
 * its own process, K streams from a separate client process
 * (fanout-clients.ts), and in the same run the same clients against a bare
 * grpc-js server process writing the same bytes. Two protocols:
 *
 * - SotW: StreamAggregatedResources, one full CLA per stream; the bare server
 *   (bare-server.ts) pre-encodes the same CLA bytes per client locality (each
 *   distinct CLA once, before it says it is ready) and
 *   writes each stream the final bytes as many times as Canopy pushed (the
 *   median).
 * - LEDS: Envoy on DeltaAggregatedResources: the CLA names endpoint
 *   collections, the client subscribes to them, a health flip is one small
 *   member response. The bare server (bare-leds-server.ts) replays, byte for
 *   byte, responses recorded from Canopy (one stream per client locality,
 *   one burst of each size) after Canopy's rows were measured.
 *
 * Per side: server CPU and wall time from the clients' start until every
 * stream holds its first CLA (with LEDS: and its members), ACKed; RSS per
 * stream once connected and at the peak of each burst (VmHWM, reset before
 * the burst); and bursts of 1 and 100 endpoint changes (health flips via the
 * admin API for Canopy, with its default debounce), timed in the client
 * process from just before the change until each stream's last response of
 * the burst (each ACKed at once): p50/p99/max over every stream of every
 * round, responses and bytes per stream.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { serviceSpecToJson } from '../server/src/domain/spec.js';
import { failoverService, makeEndpoints, median, percentile } from './data.js';
import { cpuMs, mainCpuMs, resetPeak, sleep, start, statusKB, type Child } from './server-procs.js';
import { DEFAULT_HEAP_GROWTH_PERCENT } from '../server/src/platform/heap-growth.js';
import { claBytesOf, SERVICE, withBare, withCanopy, type Side } from './server-sides.js';
import type { ProtocolFigures, ServerFigures, SideFigures } from './server-figures.js';
import { MIN_RUNS, sig2, spread } from './stats.js';

const BARE = fileURLToPath(new URL('./bare-server.js', import.meta.url));
const BARE_LEDS = fileURLToPath(new URL('./bare-leds-server.js', import.meta.url));
const CLIENTS = fileURLToPath(new URL('./fanout-clients.js', import.meta.url));
const BURSTS = [1, 100] as const;

export type ServerMode = 'sotw' | 'leds';

interface Shape {
  readonly streams: number;
  readonly localities: number;
  readonly pairs: number;
}

const firstOf = (changes: number): number => (changes === 1 ? 1 : 100);

function clientArgs(target: string, streams: number, localities: number, mode: ServerMode): string[] {
  const args = [CLIENTS, '--target', target, '--streams', String(streams), '--localities', String(localities)];
  return [...args, '--service', SERVICE, '--mode', mode];
}

interface PassBurst {
  readonly changes: number;
  readonly lastMs: number[];
  readonly counts: number[];
  readonly bytes: number[];
  readonly cpuMs: number;
  readonly mainCpuMs: number;
  readonly peakKB: number;
}

interface Pass {
  readonly initialCpuMs: number;
  readonly initialMainCpuMs: number;
  readonly initialWallMs: number;
  readonly rssKB: number;
  readonly bursts: PassBurst[];
  /** The initial sync's and each burst's: Canopy's shared encodes, or the bare writer's distinct responses. */
  readonly encodes?: number[];
  readonly distinct?: number[];
}

/**
 * One pass against one side: the streams connect (initial sync), then one
 * burst of each size, then they disconnect. `writes`: how many times the bare
 * side writes each burst (Canopy's pushes per stream in the same pair).
 */
async function onePass(side: Side, shape: Shape, mode: ServerMode, writes?: readonly number[]): Promise<Pass> {
  const pid = side.server.proc.pid!;
  await sleep(300);
  // Counted outside the timed windows: a scrape of Canopy's /metrics before and after each.
  const encodes: number[] = [];
  const distinct: number[] = [];
  let e0 = await side.encodes?.();
  /** Encodes since the last count: a new phase's, or (`late`) the last phase's, counted before the next starts. */
  const counted = async (late = false): Promise<void> => {
    if (e0 === undefined || !side.encodes) return;
    const e = await side.encodes();
    if (late && encodes.length) encodes[encodes.length - 1]! += e - e0;
    else encodes.push(e - e0);
    e0 = e;
  };
  if (side.distinct) distinct.push(side.distinct());
  const cpu0 = cpuMs(pid);
  const main0 = mainCpuMs(pid);
  const clients = start(clientArgs(side.target, shape.streams, shape.localities, mode), 'clients');
  try {
    // Thousands of 256 KB first responses take a while on a loaded 2-core machine.
    const ready = await clients.next('ready', 600_000);
    const initialCpuMs = cpuMs(pid) - cpu0;
    const initialMainCpuMs = mainCpuMs(pid) - main0;
    await counted();
    if (mode === 'leds' && Number(ready['ledsStreams']) === 0) {
      throw new Error('the server named no LEDS collection in its CLAs (full CLAs on delta): LEDS not served');
    }
    // Settled: 2 s after the last stream's first response, both sides alike (past Canopy's 1 s hold of
    // the responses it shared and the collection it runs once a burst is over: idle-collector.ts).
    await sleep(SETTLE_MS);
    const rssKB = statusKB(pid, 'VmRSS');
    const bursts: PassBurst[] = [];
    for (const [b, changes] of BURSTS.entries()) {
      await side.prepare(firstOf(changes), changes);
      if (side.distinct) distinct.push(side.distinct());
      await counted(true);
      resetPeak(pid);
      const c0 = cpuMs(pid);
      const m0 = mainCpuMs(pid);
      const settled = await burst(clients, () => side.change(firstOf(changes), changes, b, writes?.[b] ?? 1));
      const cpu = { cpuMs: cpuMs(pid) - c0, mainCpuMs: mainCpuMs(pid) - m0 };
      bursts.push({ changes, ...settled, ...cpu, peakKB: statusKB(pid, 'VmHWM') });
      await counted();
    }
    return {
      initialCpuMs,
      initialMainCpuMs,
      initialWallMs: Number(ready['ms']),
      rssKB,
      bursts,
      ...(side.encodes ? { encodes } : {}),
      ...(side.distinct ? { distinct } : {}),
    };
  } finally {
    await clients.stop();
  }
}

/** Canopy's pushes per stream in a pass, per burst: what the bare side writes in the same pair. */
function writesOf(p: Pass): number[] {
  return p.bursts.map((b) => Math.max(1, Math.round(median(b.counts))));
}

function sideFigures(passes: readonly Pass[], rss0KB: number, streams: number): SideFigures {
  const perStream = (kb: number): number => (kb - rss0KB) / streams;
  return {
    initialCpuMs: spread(passes.map((p) => p.initialCpuMs)),
    initialMainCpuMs: spread(passes.map((p) => p.initialMainCpuMs)),
    initialWallMs: spread(passes.map((p) => p.initialWallMs)),
    rssPerStreamKB: spread(passes.map((p) => perStream(p.rssKB))),
    bursts: BURSTS.map((changes, b) => {
      const of = passes.map((p) => p.bursts[b]!);
      const lastMs = of.flatMap((x) => x.lastMs);
      return {
        changes,
        p50Ms: sig2(median(lastMs)),
        p99Ms: sig2(percentile(lastMs, 99)),
        maxMs: sig2(Math.max(...lastMs)),
        p99PerPass: spread(of.map((x) => percentile(x.lastMs, 99))),
        cpuMs: spread(of.map((x) => x.cpuMs)),
        mainCpuMs: spread(of.map((x) => x.mainCpuMs)),
        pushesPerStream: spread(of.flatMap((x) => x.counts)),
        bytesPerStream: spread(of.flatMap((x) => x.bytes)),
        peakRssPerStreamKB: sig2(Math.max(...of.map((x) => perStream(x.peakKB)))),
      };
    }),
  };
}

/** Pairs of passes, Canopy then bare, back to back, both servers up: load from elsewhere lands on both alike. */
async function interleaved(canopy: Side, bare: Side, shape: Shape, mode: ServerMode): Promise<ProtocolFigures> {
  await sleep(500);
  const rss0 = { canopy: statusKB(canopy.server.proc.pid!, 'VmRSS'), bare: statusKB(bare.server.proc.pid!, 'VmRSS') };
  const passes = { canopy: [] as Pass[], bare: [] as Pass[] };
  for (let i = 0; i < shape.pairs; i++) {
    const c = await onePass(canopy, shape, mode).catch(blame('canopy'));
    const b = await onePass(bare, shape, mode, mode === 'sotw' ? writesOf(c) : undefined).catch(blame('bare'));
    passes.canopy.push(c);
    passes.bare.push(b);
  }
  const pairs = passes.canopy.map((c, i) => [c, passes.bare[i]!] as const);
  const counts = (at: number) => pairs.map(([c, b]) => [c.encodes?.[at] ?? NaN, b.distinct?.[at] ?? NaN] as const);
  const counted = mode === 'sotw' && pairs.every(([c, b]) => c.encodes?.length && b.distinct?.length);
  return {
    ...(counted
      ? {
          encodes: {
            initial: { pushes: 1, pairs: counts(0) },
            bursts: BURSTS.map((changes, k) => ({
              changes,
              pushes: median(passes.canopy.flatMap((c) => c.bursts[k]!.counts)),
              pairs: counts(k + 1),
            })),
          },
        }
      : {}),
    canopy: sideFigures(passes.canopy, rss0.canopy, shape.streams),
    bare: sideFigures(passes.bare, rss0.bare, shape.streams),
    ratios: {
      initialCpu: spread(pairs.map(([c, b]) => c.initialCpuMs / b.initialCpuMs)),
      initialMainCpu: spread(pairs.map(([c, b]) => c.initialMainCpuMs / Math.max(TICK, b.initialMainCpuMs))),
      bursts: BURSTS.map((changes, k) => ({
        changes,
        p99: spread(pairs.map(([c, b]) => percentile(c.bursts[k]!.lastMs, 99) / percentile(b.bursts[k]!.lastMs, 99))),
        p99LessDebounce: spread(
          pairs.map(
            ([c, b]) => (percentile(c.bursts[k]!.lastMs, 99) - DEBOUNCE_MS) / percentile(b.bursts[k]!.lastMs, 99),
          ),
        ),
        cpu: spread(pairs.map(([c, b]) => c.bursts[k]!.cpuMs / Math.max(TICK, b.bursts[k]!.cpuMs))),
        mainCpu: spread(pairs.map(([c, b]) => c.bursts[k]!.mainCpuMs / Math.max(TICK, b.bursts[k]!.mainCpuMs))),
      })),
    },
    pairs: shape.pairs,
  };
}

const SETTLE_MS = 2000;

/** `canopy serve`'s default debounce, which the run's config keeps (server.debounceMs unset). */
const DEBOUNCE_MS = 100;

/** /proc counts CPU in 10 ms ticks: a burst that took less is counted as one tick. */
const TICK = 10;

interface Settled {
  readonly lastMs: number[];
  readonly counts: number[];
  readonly bytes: number[];
}

/** One burst as the clients see it: mark, change, wait until every stream has had its responses. */
async function burst(clients: Child, change: () => Promise<void>): Promise<Settled> {
  clients.send('mark');
  await clients.next('marked');
  await change();
  clients.send('settle 1000 60000');
  const settled = (await clients.next('settled', 90_000)) as unknown as Settled & { timedOut: boolean };
  if (settled.timedOut) {
    const missing = settled.counts.filter((c) => c === 0).length;
    throw new Error(
      `a burst did not reach every stream within 60 s (${missing} of ${settled.counts.length} had nothing)`,
    );
  }
  return settled;
}

/**
 * Records what Canopy sends LEDS clients, one stream per client locality: the
 * initial responses, then one burst of each size, for the bare server to replay.
 */
async function recordLeds(side: Side, shape: Shape, file: string): Promise<void> {
  const streams = Math.min(shape.streams, shape.localities);
  const clients = start(
    [...clientArgs(side.target, streams, shape.localities, 'leds'), '--record', file],
    'recording clients',
  );
  try {
    await clients.next('ready', 600_000);
    for (const changes of BURSTS) await burst(clients, () => side.change(firstOf(changes), changes, 0, 1));
    clients.send('save');
    await clients.next('saved', 120_000);
  } finally {
    await clients.stop();
  }
}

const skipped = (err: unknown) => ({ skipped: (err as Error).message });
const blame = (side: string) => (err: unknown) => {
  throw new Error(`${side}: ${(err as Error).message}`);
};

export async function serverMacro(opts: {
  readonly streams: number;
  readonly endpoints: number;
  readonly localities: number;
  readonly pairs?: number;
  readonly modes?: readonly ServerMode[];
  /** Canopy's push window (server.pushWindow); absent: its default. */
  readonly pushWindow?: number;
  /** glibc's mmap threshold for both servers (MALLOC_MMAP_THRESHOLD_), as a deployment may set it. */
  readonly mallocMmapThreshold?: number;
  /** V8's heap growth for both servers (CANOPY_HEAP_GROWTH); absent: `canopy serve`'s default. */
  readonly heapGrowth?: number;
}): Promise<ServerFigures> {
  // Both servers alike: `canopy serve` reads CANOPY_HEAP_GROWTH, and so do the bare servers (heap-growth.ts).
  const heapGrowth = opts.heapGrowth ?? DEFAULT_HEAP_GROWTH_PERCENT;
  const env = {
    CANOPY_HEAP_GROWTH: String(heapGrowth),
    ...(opts.mallocMmapThreshold !== undefined ? { MALLOC_MMAP_THRESHOLD_: String(opts.mallocMmapThreshold) } : {}),
  };
  const shape: Shape = { streams: opts.streams, localities: opts.localities, pairs: opts.pairs ?? MIN_RUNS };
  const modes = opts.modes ?? ['sotw', 'leds'];
  const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-bench-server-'));
  const endpoints = makeEndpoints(opts.endpoints);
  const file = path.join(dir, 'mesh.json');
  // The default debounce and (unless asked otherwise) push window: the figures are what a deployment sees.
  writeFileSync(
    file,
    JSON.stringify({
      server: {
        host: '127.0.0.1',
        xdsPort: 0,
        adminPort: 0,
        ...(opts.pushWindow !== undefined ? { pushWindow: opts.pushWindow } : {}),
      },
      services: [serviceSpecToJson(failoverService(SERVICE, endpoints))],
    }),
  );
  let sotw: ProtocolFigures | { skipped: string } | undefined;
  let leds: ProtocolFigures | { skipped: string } | undefined;
  try {
    if (modes.includes('sotw')) {
      try {
        // The bare server reads the config as Canopy did and flips the same endpoints itself.
        sotw = await withCanopy(
          file,
          endpoints,
          (canopy) =>
            withBare(
              [BARE, '--config', file, '--service', SERVICE, '--localities', String(opts.localities)],
              (bare) => interleaved(canopy, bare, shape, 'sotw'),
              (_b, writes) => `write ${writes}`,
              env,
            ),
          env,
        );
      } catch (err) {
        sotw = skipped(err);
      }
    }
    if (modes.includes('leds')) {
      const record = path.join(dir, 'leds-record.json');
      try {
        // The bare LEDS server replays what Canopy sent: recorded first, then the pairs with both up.
        leds = await withCanopy(
          file,
          endpoints,
          async (canopy) => {
            await recordLeds(canopy, shape, record);
            return withBare(
              [BARE_LEDS, '--record', record],
              (bare) => interleaved(canopy, bare, shape, 'leds'),
              (b) => `write ${b}`,
              env,
            );
          },
          env,
        );
      } catch (err) {
        leds = skipped(err);
      }
    }
    return {
      streams: opts.streams,
      endpoints: opts.endpoints,
      localities: opts.localities,
      pairs: shape.pairs,
      ...(opts.pushWindow !== undefined ? { pushWindow: opts.pushWindow } : {}),
      ...(opts.mallocMmapThreshold !== undefined ? { mallocMmapThreshold: opts.mallocMmapThreshold } : {}),
      heapGrowth,
      claBytes: claBytesOf(endpoints),
      ...(sotw ? { sotw } : {}),
      ...(leds ? { leds } : {}),
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
