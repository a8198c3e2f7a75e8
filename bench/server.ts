/**
 * The server macro run (`npm run bench -- --only=server`): `canopy serve` as
 * its own process, K ADS streams from a separate client process
 * (fanout-clients.ts), and in the same run the same clients against a bare
 * grpc-js server process writing the same bytes (bare-server.ts).
 *
 * Per side: server CPU and wall time from the clients' start until every
 * stream has ACKed its first CLA; RSS per stream once connected and at the
 * peak of each burst (VmHWM, reset before the burst); and bursts of 1 and 100
 * endpoint changes (health flips via the admin API for Canopy, with its
 * default debounce), timed in the client process from just before the change
 * until each stream's last response of the burst (each ACKed at once):
 * p50/p99/max over every stream of every round, and responses per stream.
 * The bare server writes each stream the final bytes as many times as Canopy
 * pushed (the median), with none of the xDS work.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createInterface, type Interface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { Mesh, type ServiceState } from '../server/src/domain/mesh.js';
import { endpointKey, type Endpoint } from '../server/src/domain/service.js';
import { serverClaCache } from '../server/src/resources/endpoint.js';
import { serviceSpecToJson } from '../server/src/domain/spec.js';
import { failoverService, makeEndpoints, median, percentile } from './data.js';
import { MIN_RUNS, sig2, spread, type Spread } from './stats.js';

const CLI = fileURLToPath(new URL('../server/src/cli.js', import.meta.url));
const BARE = fileURLToPath(new URL('./bare-server.js', import.meta.url));
const CLIENTS = fileURLToPath(new URL('./fanout-clients.js', import.meta.url));
const SERVICE = 'svc';
const TICK_MS = 10; // /proc/<pid>/stat counts CPU in clock ticks of 10 ms (USER_HZ 100)

export interface BurstFigures {
  readonly changes: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
  /** Responses each stream received in one burst: median (min–max) over every stream and round. */
  readonly pushesPerStream: Spread;
  readonly peakRssPerStreamKB: number;
}

export interface SideFigures {
  readonly initialCpuMs: number;
  readonly initialWallMs: number;
  readonly rssPerStreamKB: number;
  readonly bursts: readonly BurstFigures[];
}

export interface ServerFigures {
  readonly streams: number;
  readonly endpoints: number;
  readonly localities: number;
  readonly rounds: number;
  /** One client's CLA (in failover mode every CLA holds every healthy endpoint). */
  readonly claBytes: number;
  readonly canopy: SideFigures;
  readonly bare: SideFigures;
}

/** A child speaking JSON lines on stdout, answering line commands on stdin. */
class Child {
  private readonly lines: Interface;
  private readonly waiting: { event: string; resolve: (m: Record<string, unknown>) => void }[] = [];
  constructor(
    readonly proc: ChildProcess,
    what: string,
  ) {
    this.lines = createInterface({ input: proc.stdout! });
    this.lines.on('line', (line) => {
      let msg: Record<string, unknown>;
      try {
        msg = JSON.parse(line) as Record<string, unknown>;
      } catch {
        return;
      }
      // Canopy's pino lines carry `msg`; the bench children's carry `event`.
      const event = String(msg['event'] ?? msg['msg'] ?? '');
      if (event === 'error') process.stderr.write(`${what}: ${String(msg['detail'])}\n`);
      const i = this.waiting.findIndex((w) => w.event === event);
      if (i >= 0) this.waiting.splice(i, 1)[0]!.resolve(msg);
    });
  }

  next(event: string, timeoutMs = 120_000): Promise<Record<string, unknown>> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no "${event}" within ${timeoutMs} ms`)), timeoutMs);
      this.waiting.push({
        event,
        resolve: (m) => {
          clearTimeout(timer);
          resolve(m);
        },
      });
    });
  }

  send(line: string): void {
    this.proc.stdin!.write(`${line}\n`);
  }

  async stop(): Promise<void> {
    this.proc.stdin?.end();
    this.proc.kill();
    if (this.proc.exitCode === null && this.proc.signalCode === null) await once(this.proc, 'exit');
  }
}

function start(args: string[], what: string): Child {
  return new Child(spawn(process.execPath, args, { stdio: ['pipe', 'pipe', 'inherit'] }), what);
}

function cpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12])) * TICK_MS;
}

function statusKB(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  return Number(new RegExp(`${field}:\\s+(\\d+)`).exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? NaN);
}

/** Resets the peak RSS (VmHWM) to the current RSS; see proc(5), clear_refs. */
function resetPeak(pid: number): void {
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, '5');
  } catch {
    // Not permitted here: the peak then counts from the process's start.
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Side {
  readonly server: Child;
  readonly target: string;
  /** Makes `changes` changes starting at endpoint `first`, with `writes` responses per stream (bare only). */
  change(first: number, changes: number, writes: number): Promise<void>;
  /** Run before the mark: anything the side prepares untimed. */
  prepare(first: number, changes: number): Promise<void>;
}

async function measureSide(
  side: Side,
  opts: { streams: number; localities: number; rounds: number },
  pushesFrom?: readonly BurstFigures[],
): Promise<SideFigures> {
  const pid = side.server.proc.pid!;
  await sleep(300);
  const cpu0 = cpuMs(pid);
  const rss0 = statusKB(pid, 'VmRSS');
  const clients = start(
    [
      CLIENTS,
      '--target',
      side.target,
      '--streams',
      String(opts.streams),
      '--localities',
      String(opts.localities),
      '--service',
      SERVICE,
    ],
    'clients',
  );
  try {
    // Thousands of 256 KB first responses take a while on a loaded 2-core machine.
    const ready = await clients.next('ready', 600_000);
    const initialCpuMs = cpuMs(pid) - cpu0;
    await sleep(500);
    const rssPerStreamKB = sig2((statusKB(pid, 'VmRSS') - rss0) / opts.streams);
    const bursts: BurstFigures[] = [];
    for (const [b, changes] of [1, 100].entries()) {
      const first = changes === 1 ? 1 : 100;
      const lastMs: number[] = [];
      const counts: number[] = [];
      let peakKB = 0;
      const writes = pushesFrom ? Math.max(1, Math.round(pushesFrom[b]?.pushesPerStream.median ?? 1)) : 1;
      for (let r = 0; r < opts.rounds; r++) {
        await side.prepare(first, changes);
        resetPeak(pid);
        clients.send('mark');
        await clients.next('marked');
        await side.change(first, changes, writes);
        clients.send('settle 1000 60000');
        const settled = (await clients.next('settled', 90_000)) as {
          lastMs: number[];
          counts: number[];
          timedOut: boolean;
        };
        if (settled.timedOut) throw new Error(`a burst of ${changes} did not reach every stream within 60 s`);
        lastMs.push(...settled.lastMs);
        counts.push(...settled.counts);
        peakKB = Math.max(peakKB, statusKB(pid, 'VmHWM'));
      }
      bursts.push({
        changes,
        p50Ms: sig2(median(lastMs)),
        p99Ms: sig2(percentile(lastMs, 99)),
        maxMs: sig2(Math.max(...lastMs)),
        pushesPerStream: spread(counts),
        peakRssPerStreamKB: sig2((peakKB - rss0) / opts.streams),
      });
    }
    return { initialCpuMs: sig2(initialCpuMs), initialWallMs: sig2(Number(ready['ms'])), rssPerStreamKB, bursts };
  } finally {
    await clients.stop();
  }
}

function claBytesOf(endpoints: readonly Endpoint[]): number {
  const mesh = new Mesh();
  mesh.put(failoverService(SERVICE, endpoints));
  const client = {
    locality: { region: 'r0', zone: 'z0', subzone: 's0' },
    network: '',
    node: '',
    cluster: '',
    labels: {},
  };
  return serverClaCache().lookup(mesh.get(SERVICE) as ServiceState, client).bytes.length;
}

export async function serverMacro(opts: {
  readonly streams: number;
  readonly endpoints: number;
  readonly localities: number;
  readonly rounds?: number;
}): Promise<ServerFigures> {
  const rounds = opts.rounds ?? MIN_RUNS;
  const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-bench-server-'));
  const endpoints = makeEndpoints(opts.endpoints);
  const file = path.join(dir, 'mesh.json');
  // The default debounce: the figure is what a deployment sees.
  writeFileSync(
    file,
    JSON.stringify({
      server: { host: '127.0.0.1', xdsPort: 0, adminPort: 0 },
      services: [serviceSpecToJson(failoverService(SERVICE, endpoints))],
    }),
  );
  const health = endpoints.map(() => true);
  const flipBodies = (first: number, changes: number): { key: string; healthy: boolean }[] =>
    Array.from({ length: changes }, (_, i) => {
      const n = (first + i) % endpoints.length;
      health[n] = !health[n];
      return { key: endpointKey(endpoints[n] as Endpoint), healthy: health[n] as boolean };
    });
  try {
    // ---- Canopy
    const canopy = start([CLI, 'serve', '--config', file, '--log-level', 'info'], 'canopy');
    let canopyFigures: SideFigures;
    try {
      const ready = await canopy.next('canopy ready');
      const admin = `http://${String(ready['admin'])}`;
      canopyFigures = await measureSide(
        {
          server: canopy,
          target: String(ready['xds']),
          prepare: async () => {},
          change: async (first, changes) => {
            const flips = flipBodies(first, changes);
            const responses = await Promise.all(
              flips.map((f) =>
                fetch(`${admin}/api/v1/services/${SERVICE}/endpoints/${encodeURIComponent(f.key)}`, {
                  method: 'PATCH',
                  headers: { 'content-type': 'application/json' },
                  body: JSON.stringify({ health: f.healthy ? 'healthy' : 'unhealthy' }),
                }),
              ),
            );
            const bad = responses.find((r) => !r.ok);
            if (bad) throw new Error(`admin PATCH: ${bad.status} ${await bad.text()}`);
          },
        },
        { ...opts, rounds },
      );
    } finally {
      await canopy.stop();
    }
    // ---- bare grpc-js, same bytes, as many writes per stream as Canopy pushed
    const bare = start([BARE, '--config', file, '--service', SERVICE], 'bare server');
    let bareFigures: SideFigures;
    try {
      const ready = await bare.next('ready');
      bareFigures = await measureSide(
        {
          server: bare,
          target: String(ready['address']),
          prepare: async (first, changes) => {
            bare.send(`prepare ${first} ${changes}`);
            await bare.next('prepared');
          },
          change: async (_first, _changes, writes) => {
            bare.send(`write ${writes}`);
            await bare.next('written');
          },
        },
        { ...opts, rounds },
        canopyFigures.bursts,
      );
    } finally {
      await bare.stop();
    }
    return {
      streams: opts.streams,
      endpoints: opts.endpoints,
      localities: opts.localities,
      rounds,
      claBytes: claBytesOf(endpoints),
      canopy: canopyFigures,
      bare: bareFigures,
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
