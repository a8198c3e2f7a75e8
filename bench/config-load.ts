/**
 * Config load (section 7): `canopy serve --config FILE` as its own process,
 * from spawn until it logs "canopy ready" (xDS and admin listening, every
 * service in the store), for a 100,000-endpoint service and for 1,000
 * services × 100 endpoints, as JSON and as YAML. RSS added is the process's
 * RSS at ready less that of the same server started with no services. Every
 * start gets a new, empty data directory: the first start of a config, store
 * writes included (a restart with unchanged services writes nothing).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
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
async function startOnce(file: string): Promise<{ ms: number; cpuMs: number; rssMB: number }> {
  const dataDir = mkdtempSync(path.join(path.dirname(file), 'data-'));
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
        resolve({ ms, cpuMs, rssMB: Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? NaN) / 1024 });
      });
      child.on('exit', (code) => reject(new Error(`canopy serve ${file} exited with ${code}`)));
    });
  } finally {
    child.kill();
    if (child.exitCode === null && child.signalCode === null) await new Promise((r) => child.once('exit', r));
    rmSync(dataDir, { recursive: true, force: true });
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
    const idle = { ms: [] as number[], cpu: [] as number[], rss: [] as number[] };
    for (let i = 0; i < runs; i++) {
      const r = await startOnce(empty);
      idle.ms.push(r.ms);
      idle.cpu.push(r.cpuMs);
      idle.rss.push(r.rssMB);
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
      },
    ];
    for (const shape of shapes) {
      for (const format of quick ? (['json'] as const) : (['json', 'yaml'] as const)) {
        const file = path.join(dir, `mesh.${format}`);
        const text = configText(shape, format);
        writeFileSync(file, text);
        const ms: number[] = [];
        const cpu: number[] = [];
        const rss: number[] = [];
        for (let i = 0; i < runs; i++) {
          const r = await startOnce(file);
          ms.push(r.ms);
          cpu.push(r.cpuMs);
          rss.push(r.rssMB - idleRss);
        }
        out.push({
          config: shape.name,
          format,
          endpoints: shape.services * shape.perService,
          fileMB: Math.round(Buffer.byteLength(text) / 1e5) / 10,
          readyMs: spread(ms),
          cpuMs: spread(cpu),
          rssAddedMB: spread(rss),
        });
      }
    }
    return out;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
