/**
 * Config load (section 7): `canopy serve --config FILE` as its own process,
 * from spawn until it logs "canopy ready" (xDS and admin listening, every
 * service in the store), for a 100,000-endpoint service and for 1,000
 * services × 100 endpoints, as JSON and as YAML. RSS added is the process's
 * RSS at ready less that of the same server started with no services, and
 * its peak (VmHWM at ready) the same way. Every first start gets a new,
 * empty data directory (store writes included); the restart row starts the
 * server again on that data directory with the file unchanged.
 *
 * Admin during a reload (`adminDuringReload`): a running server whose watched
 * file is replaced by a big one; a client asks GET /healthz every 5 ms the
 * whole time. Per reload, the p99 latency of the requests asked while the
 * server parses (between its "parsing" and "parsed" log lines) against the
 * p99 of the same client on the same idle server just before: pairs, with
 * the ratio's spread.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { dump } from 'js-yaml';
import { endpointToJson } from '../server/src/domain/spec.js';
import { makeEndpoint } from './data.js';
import { MIN_RUNS, spread, type Spread } from './stats.js';

const CLI = fileURLToPath(new URL('../server/src/cli/canopy.js', import.meta.url));

export interface ConfigLoadFigures {
  readonly config: string;
  readonly format: 'json' | 'yaml';
  readonly endpoints: number;
  readonly fileMB: number;
  readonly readyMs: Spread;
  /** The server process's CPU (user + system, all threads) from spawn to ready: steadier than wall on a shared machine. */
  readonly cpuMs: Spread;
  readonly rssAddedMB: Spread;
  /** Peak RSS (VmHWM) at ready less the idle server's RSS. */
  readonly peakAddedMB: Spread;
}

interface Shape {
  readonly name: string;
  readonly services: number;
  readonly perService: number;
}

function configText(shape: Shape, format: 'json' | 'yaml'): string {
  const services = Array.from({ length: shape.services }, (_, s) => ({
    name: `svc-${s}`,
    endpoints: Array.from({ length: shape.perService }, (_, e) => {
      const j = endpointToJson(makeEndpoint(s * shape.perService + e, 1000));
      // The fields a config writer would set; the rest are defaults.
      return { address: j['address'], port: j['port'], locality: j['locality'] };
    }),
  }));
  const config = { server: { host: '127.0.0.1', xdsPort: 0, adminPort: 0 }, services };
  return format === 'json' ? JSON.stringify(config) : dump(config, { flowLevel: 4 });
}

/** Starts the server once: ms from spawn to "canopy ready", and its RSS then (MB). */
async function startOnce(
  file: string,
  dataDir = mkdtempSync(path.join(path.dirname(file), 'data-')),
  keep = false,
): Promise<{ ms: number; cpuMs: number; rssMB: number; peakMB: number }> {
  const t0 = performance.now();
  const child = spawn(
    process.execPath,
    [CLI, 'serve', '--config', file, '--data-dir', dataDir, '--log-level', 'info'],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  try {
    return await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`canopy serve ${file}: not ready within 120 s`)), 120_000);
      createInterface({ input: child.stdout! }).on('line', (line) => {
        if (!line.includes('"canopy ready"')) return;
        clearTimeout(timer);
        const ms = performance.now() - t0;
        const status = readFileSync(`/proc/${child.pid}/status`, 'utf8');
        const stat = readFileSync(`/proc/${child.pid}/stat`, 'utf8');
        const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
        // utime and stime, in clock ticks of 10 ms (USER_HZ 100).
        const cpuMs = (Number(f[11]) + Number(f[12])) * 10;
        const kb = (field: string): number => Number(new RegExp(`${field}:\\s+(\\d+)`).exec(status)?.[1] ?? NaN);
        resolve({ ms, cpuMs, rssMB: kb('VmRSS') / 1024, peakMB: kb('VmHWM') / 1024 });
      });
      child.on('exit', (code) => reject(new Error(`canopy serve ${file} exited with ${code}`)));
    });
  } finally {
    child.kill();
    if (child.exitCode === null && child.signalCode === null) await new Promise((r) => child.once('exit', r));
    if (!keep) rmSync(dataDir, { recursive: true, force: true });
  }
}

export async function configLoad(quick: boolean): Promise<ConfigLoadFigures[]> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-bench-config-'));
  const runs = MIN_RUNS;
  const shapes: Shape[] = quick
    ? [{ name: '1 service × 10,000', services: 1, perService: 10_000 }]
    : [
        { name: '1 service × 100,000', services: 1, perService: 100_000 },
        { name: '1,000 services × 100', services: 1000, perService: 100 },
      ];
  try {
    const empty = path.join(dir, 'empty.json');
    writeFileSync(empty, JSON.stringify({ server: { host: '127.0.0.1', xdsPort: 0, adminPort: 0 }, services: [] }));
    const idle = { ms: [] as number[], cpu: [] as number[], rss: [] as number[], peak: [] as number[] };
    for (let i = 0; i < runs; i++) {
      const r = await startOnce(empty);
      idle.ms.push(r.ms);
      idle.cpu.push(r.cpuMs);
      idle.rss.push(r.rssMB);
      idle.peak.push(r.peakMB);
    }
    const idleRss = spread(idle.rss).median;
    // The floor: process start, module loading and listening, with nothing to load.
    const out: ConfigLoadFigures[] = [
      {
        config: 'no services',
        format: 'json',
        endpoints: 0,
        fileMB: 0,
        readyMs: spread(idle.ms),
        cpuMs: spread(idle.cpu),
        rssAddedMB: spread([0]),
        peakAddedMB: spread(idle.peak.map((p) => p - idleRss)),
      },
    ];
    for (const shape of shapes) {
      for (const format of quick ? (['json'] as const) : (['json', 'yaml'] as const)) {
        const file = path.join(dir, `mesh.${format}`);
        const text = configText(shape, format);
        writeFileSync(file, text);
        const first = { ms: [] as number[], cpu: [] as number[], rss: [] as number[], peak: [] as number[] };
        const again = { ms: [] as number[], cpu: [] as number[], rss: [] as number[], peak: [] as number[] };
        for (let i = 0; i < runs; i++) {
          // A first start on an empty data directory, then a restart on it with the file unchanged.
          const dataDir = mkdtempSync(path.join(dir, 'data-'));
          for (const [into, r] of [
            [first, await startOnce(file, dataDir, true)],
            [again, await startOnce(file, dataDir, false)],
          ] as const) {
            into.ms.push(r.ms);
            into.cpu.push(r.cpuMs);
            into.rss.push(r.rssMB - idleRss);
            into.peak.push(r.peakMB - idleRss);
          }
        }
        for (const [config, f] of [
          [shape.name, first],
          [`${shape.name}, restart unchanged`, again],
        ] as const) {
          out.push({
            config,
            format,
            endpoints: shape.services * shape.perService,
            fileMB: Math.round(Buffer.byteLength(text) / 1e5) / 10,
            readyMs: spread(f.ms),
            cpuMs: spread(f.cpu),
            rssAddedMB: spread(f.rss),
            peakAddedMB: spread(f.peak),
          });
        }
      }
    }
    return out;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export interface AdminDuringReloadFigures {
  readonly fileMB: number;
  readonly endpoints: number;
  readonly reloads: number;
  /** p99 of GET /healthz asked while the server parsed, per reload. */
  readonly duringParseP99Ms: Spread;
  /** Requests asked during each parse (0 would mean the parse blocked them all). */
  readonly answersDuringParse: Spread;
  /** The same client on the same server, idle, just before each reload. */
  readonly idleP99Ms: Spread;
  readonly timesIdle: Spread;
  /** How long each parse took (server log lines, bench clock). */
  readonly parseMs: Spread;
}

/** Polls GET /healthz every ~5 ms until `stop()` says so: each request's start and latency, ms. */
async function poll(url: string, stop: () => boolean): Promise<{ at: number; ms: number }[]> {
  const out: { at: number; ms: number }[] = [];
  const deadline = performance.now() + 300_000;
  while (!stop() && performance.now() < deadline) {
    const at = performance.now();
    const res = await fetch(url);
    await res.arrayBuffer();
    out.push({ at, ms: performance.now() - at });
    // A client asking every few ms, not a loop that takes a core from the parse it measures.
    await new Promise((r) => setTimeout(r, 5));
  }
  return out;
}

const p99 = (xs: readonly number[]): number =>
  [...xs].sort((a, b) => a - b)[Math.max(0, Math.ceil(xs.length * 0.99) - 1)] ?? NaN;

/** A big config file replacing a small one under a running server, `reloads` times; the admin API asked throughout. */
export async function adminDuringReload(quick: boolean): Promise<AdminDuringReloadFigures> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-bench-reload-'));
  const file = path.join(dir, 'mesh.json');
  const perService = 1000;
  // About 90 B of JSON per endpoint: 50 MB in a full run, 10 MB with --quick.
  const services = quick ? 110 : 550;
  const text = (variant: number): string =>
    configText({ name: 'reload', services, perService }, 'json').replace('"port":8080', `"port":${8000 + variant}`);
  const small = JSON.stringify({ server: { host: '127.0.0.1', xdsPort: 0, adminPort: 0 }, services: [] });
  writeFileSync(file, small);
  const dataDir = path.join(dir, 'data');
  const marks: { line: string; at: number }[] = [];
  const child = spawn(
    process.execPath,
    [CLI, 'serve', '--config', file, '--data-dir', dataDir, '--log-level', 'info'],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  const seen = (msg: string, after: number): number | undefined =>
    marks.find((m) => m.at >= after && m.line.includes(`"msg":"${msg}"`))?.at;
  try {
    let admin = '';
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('canopy serve: not ready within 60 s')), 60_000);
      createInterface({ input: child.stdout! }).on('line', (line) => {
        marks.push({ line: line.slice(0, 300), at: performance.now() });
        if (!line.includes('"canopy ready"')) return;
        clearTimeout(timer);
        admin = String((JSON.parse(line) as { admin: string }).admin);
        resolve();
      });
      child.on('exit', (code) => reject(new Error(`canopy serve exited with ${code}`)));
    });
    const url = `http://${admin}/healthz`;
    const figures = {
      during: [] as number[],
      count: [] as number[],
      idle: [] as number[],
      ratio: [] as number[],
      parse: [] as number[],
    };
    let bytes = 0;
    for (let i = 0; i < MIN_RUNS; i++) {
      const body = text(i);
      bytes = Buffer.byteLength(body);
      // The idle baseline: the same client, the same server, 1.5 s just before.
      const idleUntil = performance.now() + 1500;
      const idle = await poll(url, () => performance.now() > idleUntil);
      const t0 = performance.now();
      writeFileSync(`${file}.tmp`, body);
      renameSync(`${file}.tmp`, file);
      const asked = await poll(url, () => seen('config reloaded', t0) !== undefined);
      const from = seen('config file changed: parsing', t0);
      const to = seen('config file parsed: applying', t0);
      if (from === undefined || to === undefined) throw new Error('the server did not log its parse of the reload');
      const during = asked.filter((r) => r.at >= from && r.at <= to).map((r) => r.ms);
      const idleP99 = p99(idle.map((r) => r.ms));
      const duringP99 = during.length ? p99(during) : to - from;
      figures.during.push(duringP99);
      figures.count.push(during.length);
      figures.idle.push(idleP99);
      figures.ratio.push(duringP99 / idleP99);
      figures.parse.push(to - from);
    }
    return {
      fileMB: Math.round(bytes / 1e5) / 10,
      endpoints: services * perService,
      reloads: MIN_RUNS,
      duringParseP99Ms: spread(figures.during),
      answersDuringParse: spread(figures.count),
      idleP99Ms: spread(figures.idle),
      timesIdle: spread(figures.ratio),
      parseMs: spread(figures.parse),
    };
  } finally {
    child.kill();
    if (child.exitCode === null && child.signalCode === null) await new Promise((r) => child.once('exit', r));
    rmSync(dir, { recursive: true, force: true });
  }
}
