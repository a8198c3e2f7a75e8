/**
 * What grpc-js's framing copy costs (`npm run bench -- --only=framed-copy`): grpc-js frames every
 * response by allocating len + 5 bytes and copying the message in (serializeMessage), per stream, even
 * when every stream is sent the same Buffer. Two servers do the same work, each in its own process
 * (framed-copy-server.ts): a bare grpc-js server writing one shared pre-encoded DiscoveryResponse with
 * call.write, and a bare node:http2 gRPC server writing the 5-byte frame header and the same shared
 * Buffer as two writes (no copy). One client process per pass, the same for both
 * (framed-copy-clients.ts), opens K streams, one SotW request each, checks every response's bytes
 * against the expected ones and waits for status OK.
 *
 * Per pass: the server's CPU (user and system apart, from /proc/<pid>/stat; its main thread apart),
 * the time until every stream has its response and OK, and the server's GC pauses (PerformanceObserver).
 * Both servers stay up; passes are interleaved in pairs (the order alternating), after one unmeasured
 * warm-up pass each; the figures are medians (min–max) over the pairs, the ratio grpc-js ÷ node:http2
 * taken per pair. A pass whose streams did not all get the expected bytes fails the run.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { makeResource } from '../server/src/resources/resource.js';
import { ENDPOINT_TYPE } from '../server/src/resources/type-urls.js';
import { encodeDiscoveryResponse } from '../server/src/wire/envelope.js';
import { makeEndpoints } from './data.js';
import { sleep, start, type Child } from './server-procs.js';
import { claOf } from './server-sides.js';
import { show, sig2, spread, type Spread } from './stats.js';

const SERVER = fileURLToPath(new URL('./framed-copy-server.js', import.meta.url));
const CLIENTS = fileURLToPath(new URL('./framed-copy-clients.js', import.meta.url));
const KINDS = ['grpc-js', 'h2'] as const;
type Kind = (typeof KINDS)[number];
const TICK_MS = 10; // /proc counts CPU in clock ticks (USER_HZ 100)

export interface FramedCopyOptions {
  readonly streams: number;
  readonly pairs: number;
  /** Endpoints in the one CLA: 10,000 make a DiscoveryResponse of about 250 KB. */
  readonly endpoints: number;
  readonly timeoutMs: number;
  readonly log: (line: string) => void;
}

interface Pass {
  readonly userMs: number;
  readonly sysMs: number;
  readonly cpuMs: number;
  /** CPU of threads other than the main one: V8's background GC, libuv's pool. */
  readonly otherThreadsMs: number;
  readonly wallMs: number;
  readonly gcMs: number;
  readonly gcCount: number;
  readonly gcByKind: Record<string, number>;
}

const FIGURES = ['cpuMs', 'userMs', 'sysMs', 'otherThreadsMs', 'wallMs', 'gcMs', 'gcCount'] as const;
type Figure = (typeof FIGURES)[number];

export interface FramedCopyFigures {
  readonly streams: number;
  readonly responseBytes: number;
  readonly pairs: number;
  readonly load1: readonly number[];
  readonly sides: Record<Kind, Record<Figure, Spread>>;
  /** grpc-js ÷ node:http2, per pair. */
  readonly ratios: Record<Figure, Spread>;
  readonly passes: Record<Kind, readonly Pass[]>;
}

/** One real CLA of `endpoints` endpoints in its DiscoveryResponse, as Canopy would send it. */
function responseBytes(endpoints: number): Buffer {
  const any = makeResource('svc', ENDPOINT_TYPE, claOf('svc', makeEndpoints(endpoints))).any;
  return encodeDiscoveryResponse({ versionInfo: 'v1', typeUrl: ENDPOINT_TYPE, nonce: 'n1', resources: [any] });
}

/** User and system CPU of a process (all threads) and of its main thread, ms. */
function cpu(pid: number): { user: number; sys: number; main: number } {
  const fields = (file: string): string[] => {
    const stat = readFileSync(file, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  };
  const all = fields(`/proc/${pid}/stat`);
  const main = fields(`/proc/${pid}/task/${pid}/stat`);
  return {
    user: Number(all[11]) * TICK_MS,
    sys: Number(all[12]) * TICK_MS,
    main: (Number(main[11]) + Number(main[12])) * TICK_MS,
  };
}

async function onePass(kind: Kind, server: Child, port: number, file: string, opts: FramedCopyOptions): Promise<Pass> {
  const pid = server.proc.pid!;
  server.send('gc');
  await server.next('gc');
  const c0 = cpu(pid);
  const clients = start(
    [
      CLIENTS,
      '--target',
      `127.0.0.1:${port}`,
      '--streams',
      String(opts.streams),
      '--response',
      file,
      '--timeout',
      String(opts.timeoutMs),
    ],
    `framed-copy clients ${kind}`,
  );
  const done = await clients.next('done', opts.timeoutMs + 30_000);
  await clients.stop();
  // The background collector frees the copies after the last write: its CPU counts, so wait for the
  // server to be idle (CPU still for 200 ms, bounded to 5 s) before reading.
  let c1 = cpu(pid);
  for (let i = 0; i < 25; i++) {
    await sleep(200);
    const c = cpu(pid);
    if (c.user + c.sys === c1.user + c1.sys) break;
    c1 = c;
  }
  server.send('gc');
  const gc = await server.next('gc');
  const failed = Number(done['failed']) + Number(done['mismatched']);
  if (done['timedOut'] || Number(done['ok']) !== opts.streams || Number(gc['served']) !== opts.streams) {
    throw new Error(`framed-copy ${kind}: ${JSON.stringify(done)}, served ${String(gc['served'])} (${failed} bad)`);
  }
  const userMs = c1.user - c0.user;
  const sysMs = c1.sys - c0.sys;
  return {
    userMs,
    sysMs,
    cpuMs: userMs + sysMs,
    otherThreadsMs: userMs + sysMs - (c1.main - c0.main),
    wallMs: Number(done['ms']),
    gcMs: Number(gc['ms']),
    gcCount: Number(gc['count']),
    gcByKind: gc['byKind'] as Record<string, number>,
  };
}

async function startServer(kind: Kind, file: string): Promise<{ child: Child; port: number }> {
  const child = start([SERVER, '--kind', kind, '--response', file], `framed-copy server ${kind}`);
  const ready = await child.next('ready', 30_000);
  return { child, port: Number(ready['port']) };
}

export async function framedCopy(opts: FramedCopyOptions): Promise<FramedCopyFigures> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-bench-framed-'));
  const file = path.join(dir, 'response.bin');
  const bytes = responseBytes(opts.endpoints);
  writeFileSync(file, bytes);
  const servers: Partial<Record<Kind, { child: Child; port: number }>> = {};
  try {
    for (const k of KINDS) servers[k] = await startServer(k, file);
    const run = (k: Kind) => onePass(k, servers[k]!.child, servers[k]!.port, file, opts);
    opts.log(`   warm-up: ${opts.streams} streams each, ${bytes.length} bytes per response`);
    for (const k of KINDS) await run(k);
    const passes: Record<Kind, Pass[]> = { 'grpc-js': [], h2: [] };
    const load1: number[] = [];
    for (let p = 0; p < opts.pairs; p++) {
      await sleep(300);
      load1.push(Number(os.loadavg()[0]!.toFixed(2)));
      for (const k of p % 2 ? [...KINDS].reverse() : KINDS) passes[k].push(await run(k));
      const [a, b] = [passes['grpc-js'][p]!, passes.h2[p]!];
      opts.log(
        `   pair ${p + 1}: grpc-js ${a.cpuMs} ms CPU, ${Math.round(a.wallMs)} ms; node:http2 ${b.cpuMs} ms CPU, ${Math.round(b.wallMs)} ms (load ${load1[p]})`,
      );
    }
    const of = (k: Kind) =>
      Object.fromEntries(FIGURES.map((f) => [f, spread(passes[k].map((x) => x[f]))])) as Record<Figure, Spread>;
    const ratios = Object.fromEntries(
      FIGURES.map((f) => [f, spread(passes['grpc-js'].map((x, i) => x[f] / Math.max(passes.h2[i]![f], 1e-9)))]),
    ) as Record<Figure, Spread>;
    return {
      streams: opts.streams,
      responseBytes: bytes.length,
      pairs: opts.pairs,
      load1,
      sides: { 'grpc-js': of('grpc-js'), h2: of('h2') },
      ratios,
      passes,
    };
  } finally {
    for (const s of Object.values(servers)) await s.child.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

const LABELS: Record<Figure, string> = {
  cpuMs: 'server CPU ms',
  userMs: 'user ms',
  sysMs: 'system ms',
  otherThreadsMs: 'off-main-thread CPU ms',
  wallMs: 'all responses ms',
  gcMs: 'GC pause ms',
  gcCount: 'GC pauses',
};

export function printFramedCopy(rows: readonly (FramedCopyFigures | { streams: number; skipped: string })[]): void {
  for (const r of rows) {
    if ('skipped' in r) {
      console.log(`\nF. Framed copy, ${r.streams} streams: skipped (${r.skipped})`);
      continue;
    }
    console.log(
      `\nF. Framed copy: ${r.streams} streams, one shared ${r.responseBytes}-byte DiscoveryResponse; median (min–max) of ${r.pairs} interleaved pairs,\n` +
        `   ratio per pair; load average per pair ${r.load1.join(', ')} on ${os.cpus().length} cores`,
    );
    console.table(
      FIGURES.map((f) => ({
        figure: LABELS[f],
        'grpc-js (copy)': show(r.sides['grpc-js'][f]),
        'node:http2 (no copy)': show(r.sides.h2[f]),
        '× grpc-js': show(r.ratios[f]),
        'Δ ms': f === 'gcCount' ? '' : sig2((r.sides['grpc-js'][f].exact ?? NaN) - (r.sides.h2[f].exact ?? NaN)),
      })),
    );
  }
}

/**
 * The section as run.ts runs it: --framed-streams=2000,10000 (default 2,000; --quick 200),
 * --framed-pairs=N (default 5), --framed-endpoints=N (default 10,000: a 250 KB response).
 */
export async function framedCopySection(
  quick: boolean,
  arg: (name: string) => string | undefined,
  log: (line: string) => void,
): Promise<(FramedCopyFigures | { streams: number; skipped: string })[]> {
  const counts = (arg('framed-streams') ?? (quick ? '200' : '2000')).split(',').map(Number);
  const rows: (FramedCopyFigures | { streams: number; skipped: string })[] = [];
  for (const streams of counts) {
    log(`F. framed copy: ${streams} streams, grpc-js vs node:http2…`);
    try {
      rows.push(
        await framedCopy({
          streams,
          pairs: Number(arg('framed-pairs') ?? 5),
          endpoints: Number(arg('framed-endpoints') ?? 10_000),
          timeoutMs: 60_000 + streams * 30,
          log,
        }),
      );
    } catch (err) {
      rows.push({ streams, skipped: (err as Error).message });
    }
  }
  return rows;
}
