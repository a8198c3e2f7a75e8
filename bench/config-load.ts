/**
 * Config load (issue 24, section 4): `canopy serve --config FILE` as its own
 * process, from spawn until it logs "canopy ready" (xDS and admin listening,
 * every service in the store and the mesh), for a 100,000-endpoint service
 * as JSON and as YAML. Each round, interleaved: the same server with no
 * services (the floor: process start, modules, listening), then per format
 * the fair baseline, a first start on a new, empty data directory, and a
 * restart on that directory with the file unchanged. 5 rounds; medians with
 * their spread.
 *
 * - load time: ready less the floor's ready in the same round (what the
 *   config costs); peak: VmHWM at ready less the floor's RSS.
 * - baseline of a first start: a bare process doing the same parse and the
 *   same validation of the same file (`JSON.parse` or one js-yaml load, then
 *   the server's `parseConfig`), its own time and peak RSS added; Canopy
 *   also writes the store and builds the mesh.
 * - baseline of a restart: the first start in the same round.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { dump } from 'js-yaml';
import { endpointToJson } from '../server/src/domain/spec.js';
import { makeEndpoint } from './data.js';
import type { Goal } from './goal.js';
import { decided, MIN_RUNS, show, spread, type Spread } from './stats.js';

export const CLI = fileURLToPath(new URL('../server/src/cli/canopy.js', import.meta.url));
const BASELINE = fileURLToPath(new URL('./config-parse-baseline.js', import.meta.url));

export interface ConfigLoadFigures {
  readonly config: string;
  readonly format: 'json' | 'yaml';
  readonly endpoints: number;
  readonly fileMB: number;
  /** Spawn to "canopy ready". */
  readonly readyMs: Spread;
  /** Ready less the no-services start of the same round. */
  readonly addedMs: Spread;
  /** The server process's CPU (user + system, all threads) from spawn to ready: steadier than wall on a shared machine. */
  readonly cpuMs: Spread;
  /** CPU less the no-services start's of the same round. */
  readonly addedCpuMs: Spread;
  readonly rssAddedMB: Spread;
  /** Peak RSS (VmHWM) at ready less the idle server's RSS. */
  readonly peakAddedMB: Spread;
  /** The fair baseline of the same round, and this row's load time over it (pairs). */
  readonly baseline?: { readonly what: string; readonly ms: Spread; readonly peakMB?: Spread; readonly times: Spread };
}

interface Shape {
  readonly name: string;
  readonly services: number;
  readonly perService: number;
}

export function configText(shape: Shape, format: 'json' | 'yaml'): string {
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

interface Start {
  readonly ms: number;
  readonly cpuMs: number;
  readonly rssMB: number;
  readonly peakMB: number;
}

/** Starts the server once: ms from spawn to "canopy ready", its CPU and RSS then (MB). */
async function startOnce(file: string, dataDir: string): Promise<Start> {
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
  }
}

/** The bare parse + validation of `file` in its own process: its time and peak RSS added (MB). */
function baselineOnce(file: string): { ms: number; peakMB: number } {
  const r = spawnSync(process.execPath, [BASELINE, file], { encoding: 'utf8', timeout: 120_000 });
  if (r.status !== 0) throw new Error(`config baseline on ${file} failed: ${r.stderr}`);
  return JSON.parse(r.stdout) as { ms: number; peakMB: number };
}

interface Samples {
  ms: number[];
  added: number[];
  cpu: number[];
  addedCpu: number[];
  rss: number[];
  peak: number[];
  base: number[];
  basePeak: number[];
  times: number[];
}
const samples = (): Samples => ({
  ms: [],
  added: [],
  cpu: [],
  addedCpu: [],
  rss: [],
  peak: [],
  base: [],
  basePeak: [],
  times: [],
});

export async function configLoad(quick: boolean): Promise<ConfigLoadFigures[]> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-bench-config-'));
  const shape: Shape = quick
    ? { name: '1 service × 10,000', services: 1, perService: 10_000 }
    : { name: '1 service × 100,000', services: 1, perService: 100_000 };
  const formats = quick ? (['json'] as const) : (['json', 'yaml'] as const);
  try {
    const empty = path.join(dir, 'empty.json');
    writeFileSync(empty, JSON.stringify({ server: { host: '127.0.0.1', xdsPort: 0, adminPort: 0 }, services: [] }));
    const files = new Map(formats.map((f) => [f, path.join(dir, `mesh.${f}`)]));
    const bytes = new Map<string, number>();
    for (const [format, file] of files) {
      const text = configText(shape, format);
      writeFileSync(file, text);
      bytes.set(format, Buffer.byteLength(text));
    }
    const idle = samples();
    const first = new Map(formats.map((f) => [f, samples()]));
    const again = new Map(formats.map((f) => [f, samples()]));
    for (let round = 0; round < MIN_RUNS; round++) {
      const floorDir = mkdtempSync(path.join(dir, 'data-'));
      const floor = await startOnce(empty, floorDir);
      rmSync(floorDir, { recursive: true, force: true });
      idle.ms.push(floor.ms);
      idle.cpu.push(floor.cpuMs);
      idle.rss.push(floor.rssMB);
      idle.peak.push(floor.peakMB - floor.rssMB);
      for (const format of formats) {
        const file = files.get(format)!;
        const base = baselineOnce(file);
        const dataDir = mkdtempSync(path.join(dir, 'data-'));
        const one = await startOnce(file, dataDir);
        const two = await startOnce(file, dataDir);
        rmSync(dataDir, { recursive: true, force: true });
        const add = (into: Samples, r: Start, baseMs: number, basePeak?: number): void => {
          into.ms.push(r.ms);
          into.added.push(r.ms - floor.ms);
          into.cpu.push(r.cpuMs);
          into.addedCpu.push(r.cpuMs - floor.cpuMs);
          into.rss.push(r.rssMB - floor.rssMB);
          into.peak.push(r.peakMB - floor.rssMB);
          into.base.push(baseMs);
          if (basePeak !== undefined) into.basePeak.push(basePeak);
          into.times.push((r.ms - floor.ms) / baseMs);
        };
        add(first.get(format)!, one, base.ms, base.peakMB);
        add(again.get(format)!, two, one.ms - floor.ms);
      }
    }
    const row = (config: string, format: 'json' | 'yaml', s: Samples, baseline?: string): ConfigLoadFigures => ({
      config,
      format,
      endpoints: shape.services * shape.perService,
      fileMB: Math.round((bytes.get(format) ?? 0) / 1e5) / 10,
      readyMs: spread(s.ms),
      addedMs: spread(s.added),
      cpuMs: spread(s.cpu),
      addedCpuMs: spread(s.addedCpu),
      rssAddedMB: spread(s.rss),
      peakAddedMB: spread(s.peak),
      ...(baseline === undefined
        ? {}
        : {
            baseline: {
              what: baseline,
              ms: spread(s.base),
              ...(s.basePeak.length ? { peakMB: spread(s.basePeak) } : {}),
              times: spread(s.times),
            },
          }),
    });
    const out: ConfigLoadFigures[] = [{ ...row('no services (the floor)', 'json', idle), endpoints: 0, fileMB: 0 }];
    for (const format of formats) {
      const parse = format === 'json' ? 'JSON.parse' : 'one js-yaml load';
      out.push(row(shape.name, format, first.get(format)!, `${parse} + parseConfig, bare process`));
      out.push(row(`${shape.name}, restart unchanged`, format, again.get(format)!, 'first start, same round'));
    }
    return out;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export function printConfigLoad(configs: ConfigLoadFigures[] | { skipped: string }): void {
  console.log(
    '\n7. Config load: `canopy serve --config FILE` spawned → "canopy ready"; load ms = ready less the no-services start\n' +
      '   of the same round; peak/RSS added (MB) vs that start; median (min–max) of 5 interleaved rounds; baselines\n' +
      '   in the same rounds (first start: a bare parse + validation process; restart: the first start)',
  );
  console.table(
    'skipped' in configs
      ? configs
      : configs.map((c) => ({
          config: c.config,
          format: c.format,
          'file MB': c.fileMB,
          'ready ms': show(c.readyMs),
          'load ms': show(c.addedMs),
          'server CPU ms': show(c.cpuMs),
          'load CPU ms': show(c.addedCpuMs),
          'peak added MB': show(c.peakAddedMB),
          baseline: c.baseline
            ? `${c.baseline.what}: ${show(c.baseline.ms)} ms${c.baseline.peakMB ? `, +${show(c.baseline.peakMB)} MB` : ''}`
            : '',
          '× baseline': c.baseline ? show(c.baseline.times) : '',
        })),
  );
}

/** Section 4's goals, met or not, with their baselines. */
export function configGoals(configs: ConfigLoadFigures[]): Goal[] {
  const big = configs.filter((c) => c.endpoints >= 100_000 && !c.config.includes('restart'));
  const restarts = configs.filter((c) => c.endpoints >= 100_000 && c.config.includes('restart'));
  return [
    {
      goal: '100k-endpoint config loads in ≤ 1 s with ≤ 300 MB peak RSS added, JSON and YAML',
      figure:
        big
          .map(
            (c) =>
              `${c.format}: ${show(c.addedMs)} ms (unrounded median ${Math.round(decided(c.addedMs))}; CPU ${show(c.addedCpuMs)} ms) over the no-services start, ` +
              `peak +${show(c.peakAddedMB)} MB; ` +
              `${show(c.baseline!.times)}× the bare parse + validation (${show(c.baseline!.ms)} ms, +${c.baseline!.peakMB ? show(c.baseline!.peakMB) : '—'} MB)`,
          )
          .join('; ') || 'run the full bench',
      met: big.length
        ? big
            .map((c) => `${verdict(decided(c.addedMs) <= 1000 && decided(c.peakAddedMB) <= 300)} ${c.format}`)
            .join(', ')
        : 'not measured',
    },
    {
      goal: 'restart with the 100k-endpoint file unchanged loads in ≤ 0.5 s',
      figure:
        restarts
          .map(
            (c) =>
              `${c.format}: ${show(c.addedMs)} ms (unrounded median ${Math.round(decided(c.addedMs))}; CPU ${show(c.addedCpuMs)} ms), ${show(c.baseline!.times)}× the first start`,
          )
          .join('; ') || 'run the full bench',
      met: restarts.length
        ? restarts.map((c) => `${verdict(decided(c.addedMs) <= 500)} ${c.format}`).join(', ')
        : 'not measured',
    },
  ];
}

function verdict(ok: boolean): string {
  return ok ? 'met' : 'NOT met';
}
