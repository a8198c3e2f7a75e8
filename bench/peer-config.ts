/**
 * The config load against go-control-plane (`npm run bench -- --only=peer-config`, issue 31 §3): the
 * same file, a 100,000-endpoint failover service as YAML and as JSON, read by `canopy serve --config`
 * and by the go-control-plane peer in its computing mode (no --plan: it parses the file and builds
 * every locality's CLA itself, bench/peers/go-control-plane/cmd/peer/compute.go).
 *
 * Each round, interleaved, one server at a time: Canopy on an empty config, Canopy's first start on
 * the file (a new data directory), the peer on the empty config, the peer on the file. Each is timed
 * from spawn until it is ready to serve the assignment (Canopy: "canopy ready"; the peer: its "ready"
 * line, printed once it has read the file and built every CLA), with its CPU (utime + stime) and peak
 * RSS (VmHWM) then. Load = ready less the same server's empty start in the same round. After each
 * file start, a driver pass (one stream per client locality) records what that server's CLAs decode
 * to, and the two must be the same assignment (`compareAssignments`): a mismatch fails the run.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { dump } from 'js-yaml';
import { endpointToJson, serviceSpecToJson } from '../server/src/domain/spec.js';
import { failoverService, makeClients, makeEndpoints } from './data.js';
import { buildPeer } from './peer-build.js';
import { compareAssignments } from './peer-check.js';
import { startBinary } from './peer-sides.js';
import { Child, cpuMs, statusKB } from './server-procs.js';
import { spread, type Spread } from './stats.js';

const CLI = fileURLToPath(new URL('../server/src/cli/canopy.js', import.meta.url));
const SERVICE = 'svc';

type Format = 'yaml' | 'json';

/** One server's starts on one format, per round. */
export interface ConfigSide {
  readonly floorMs: Spread;
  readonly readyMs: Spread;
  readonly loadMs: Spread;
  readonly loadCpuMs: Spread;
  /** VmHWM at ready, MB. */
  readonly peakMB: Spread;
  /** VmHWM at ready less the empty start's VmHWM, MB. */
  readonly peakAddedMB: Spread;
}

export interface PeerConfigRow {
  readonly format: Format;
  readonly endpoints: number;
  readonly fileMB: number;
  readonly canopy: ConfigSide;
  readonly go: ConfigSide;
  /** Canopy's load ÷ the peer's, round by round. */
  readonly loadRatio: Spread;
  readonly cpuRatio: Spread;
  /** Client localities whose assignments were compared after each pair. */
  readonly checked: number;
}

export interface PeerConfigFigures {
  readonly go: string;
  readonly rounds: number;
  readonly rows: PeerConfigRow[];
}

interface Start {
  readonly ms: number;
  readonly cpuMs: number;
  readonly peakMB: number;
  readonly xds: string;
  readonly child: Child;
}

/** Spawns a server and waits for its ready line; it is left running (the caller stops it). */
async function startTimed(file: string, args: string[], ready: string, what: string): Promise<Start> {
  const t0 = performance.now();
  const child = new Child(spawn(file, args, { stdio: ['pipe', 'pipe', 'inherit'] }), what);
  const exited = new Promise<never>((_, reject) =>
    child.proc.once('exit', (code) => reject(new Error(`${what} exited with ${code} before it was ready`))),
  );
  exited.catch(() => {}); // it also exits when stopped, after ready
  try {
    const line = await Promise.race([child.next(ready, 300_000), exited]);
    const ms = performance.now() - t0;
    const pid = child.proc.pid!;
    return { ms, cpuMs: cpuMs(pid), peakMB: statusKB(pid, 'VmHWM') / 1024, xds: String(line['xds']), child };
  } catch (err) {
    await child.stop();
    throw err;
  }
}

interface Fixture {
  readonly dir: string;
  readonly empty: string;
  readonly files: ReadonlyMap<Format, string>;
  readonly bytes: ReadonlyMap<Format, number>;
  readonly localities: string;
  readonly checked: number;
}

function fixture(endpoints: number, formats: readonly Format[], checkLocalities: number): Fixture {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-bench-peer-config-'));
  const server = { host: '127.0.0.1', xdsPort: 0, adminPort: 0 };
  const empty = path.join(dir, 'empty.json');
  writeFileSync(empty, JSON.stringify({ server, services: [] }));
  const spec = serviceSpecToJson(failoverService(SERVICE, makeEndpoints(endpoints)));
  // The fields a config writer would set; health and weight take their defaults, as in section 7.
  const eps = makeEndpoints(endpoints).map((e) => {
    const j = endpointToJson(e);
    return { address: j['address'], port: j['port'], locality: j['locality'] };
  });
  const config = { server, services: [{ name: SERVICE, loadBalancing: spec['loadBalancing'], endpoints: eps }] };
  const files = new Map<Format, string>();
  const bytes = new Map<Format, number>();
  for (const format of formats) {
    const text = format === 'json' ? JSON.stringify(config) : dump(config, { flowLevel: 4 });
    const file = path.join(dir, `mesh.${format}`);
    writeFileSync(file, text);
    files.set(format, file);
    bytes.set(format, Buffer.byteLength(text));
  }
  const localities = path.join(dir, 'localities.json');
  const placements = makeClients(checkLocalities, checkLocalities);
  writeFileSync(
    localities,
    JSON.stringify(placements.map((p) => [p.locality.region, p.locality.zone, p.locality.subzone])),
  );
  return { dir, empty, files, bytes, localities, checked: checkLocalities };
}

/** One stream per client locality against the running server: what its CLAs decode to, into `out`. */
async function check(driverBin: string, s: Start, fx: Fixture, out: string): Promise<void> {
  const args = ['--target', s.xds, '--streams', String(fx.checked), '--localities', fx.localities];
  const driver = startBinary(driverBin, args, 'driver');
  try {
    await driver.next('ready', 300_000);
    driver.send(`check ${out}`);
    await driver.next('checked', 300_000);
  } finally {
    await driver.stop();
  }
}

interface SideSamples {
  floor: number[];
  ready: number[];
  load: number[];
  loadCpu: number[];
  peak: number[];
  peakAdded: number[];
}
const sideSamples = (): SideSamples => ({ floor: [], ready: [], load: [], loadCpu: [], peak: [], peakAdded: [] });

function addStart(into: SideSamples, floor: Start, one: Start): void {
  into.floor.push(floor.ms);
  into.ready.push(one.ms);
  into.load.push(one.ms - floor.ms);
  into.loadCpu.push(one.cpuMs - floor.cpuMs);
  into.peak.push(one.peakMB);
  into.peakAdded.push(one.peakMB - floor.peakMB);
}

const sideSpread = (s: SideSamples): ConfigSide => ({
  floorMs: spread(s.floor),
  readyMs: spread(s.ready),
  loadMs: spread(s.load),
  loadCpuMs: spread(s.loadCpu),
  peakMB: spread(s.peak),
  peakAddedMB: spread(s.peakAdded),
});

export interface PeerConfigOptions {
  readonly endpoints: number;
  readonly formats: readonly Format[];
  readonly rounds: number;
  /** Client localities of each check pass (one stream each). */
  readonly checkLocalities: number;
  readonly log: (line: string) => void;
}

export async function peerConfigBench(opts: PeerConfigOptions): Promise<PeerConfigFigures> {
  const bin = buildPeer(opts.log);
  const fx = fixture(opts.endpoints, opts.formats, opts.checkLocalities);
  const canopy = (config: string, dataDir: string) =>
    startTimed(
      process.execPath,
      [CLI, 'serve', '--config', config, '--data-dir', dataDir, '--log-level', 'info'],
      'canopy ready',
      'canopy',
    );
  const peer = (config: string) => startTimed(bin.peer, ['--config', config], 'ready', 'go-control-plane peer');
  const stopped = async (s: Start): Promise<Start> => (await s.child.stop(), s);
  const data = (name: string) => mkdtempSync(path.join(fx.dir, `${name}-`));
  try {
    const rows: PeerConfigRow[] = [];
    const samples = new Map(opts.formats.map((f) => [f, { canopy: sideSamples(), go: sideSamples() }]));
    for (let round = 0; round < opts.rounds; round++) {
      for (const format of opts.formats) {
        opts.log(`   ${format}, round ${round + 1} of ${opts.rounds}…`);
        const file = fx.files.get(format)!;
        const s = samples.get(format)!;
        const floorDir = data('floor');
        const cFloor = await stopped(await canopy(fx.empty, floorDir));
        const dataDir = data('data');
        const c = await canopy(file, dataDir);
        const cCheck = path.join(fx.dir, `check-canopy-${format}-${round}.json`);
        await check(bin.driver, c, fx, cCheck).finally(() => c.child.stop());
        for (const d of [floorDir, dataDir]) rmSync(d, { recursive: true, force: true });
        const gFloor = await stopped(await peer(fx.empty));
        const g = await peer(file);
        const gCheck = path.join(fx.dir, `check-go-${format}-${round}.json`);
        await check(bin.driver, g, fx, gCheck).finally(() => g.child.stop());
        compareAssignments(cCheck, gCheck, `config ${format} round ${round + 1}`);
        addStart(s.canopy, cFloor, c);
        addStart(s.go, gFloor, g);
        const pair = { canopy: { floor: cFloor.ms, ready: c.ms }, go: { floor: gFloor.ms, ready: g.ms } };
        opts.log(`   round ${JSON.stringify({ format, round, ...pair })}`);
      }
    }
    for (const format of opts.formats) {
      const { canopy: cs, go: gs } = samples.get(format)!;
      rows.push({
        format,
        endpoints: opts.endpoints,
        fileMB: Math.round(fx.bytes.get(format)! / 1e5) / 10,
        canopy: sideSpread(cs),
        go: sideSpread(gs),
        loadRatio: spread(cs.load.map((x, i) => x / gs.load[i]!)),
        cpuRatio: spread(cs.loadCpu.map((x, i) => x / gs.loadCpu[i]!)),
        checked: fx.checked,
      });
    }
    return { go: bin.goVersion, rounds: opts.rounds, rows };
  } finally {
    rmSync(fx.dir, { recursive: true, force: true });
  }
}
