/**
 * Admin during a reload (`adminDuringReload`): a running server whose watched
 * file is replaced by a big one; a client asks GET /healthz every 5 ms the
 * whole time. Per reload, the p99 latency of the requests asked while the
 * server parses (between its "parsing" and "parsed" log lines) against the
 * p99 of the same client on the same idle server just before: pairs, with
 * the ratio's spread.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { CLI, configText } from './config-load.js';
import { MIN_RUNS, spread, type Spread } from './stats.js';

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
