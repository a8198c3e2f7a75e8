/**
 * Canopy against go-control-plane (`npm run bench -- --only=peer`): `canopy serve` and a Go server built
 * on go-control-plane (bench/peers/go-control-plane) serve the same mesh from the same config file;
 * one driver binary (the same for both) opens K ADS streams, each on its own connection with a node in
 * one of L localities, subscribing to CDS and then the CLA its cluster names, ACKing everything.
 *
 * A pass against one side: the streams connect (initial sync: server CPU, and wall time until every
 * stream holds its CLA), RSS settles, one endpoint goes unhealthy (server CPU, delivery to each stream:
 * the time until its CLA no longer holds the endpoint), then one more endpoint a second for a window
 * (CPU per second, delivery p99, deliveries slower than the interval), then a check: for every client
 * locality, what the CLA decodes to. Passes are interleaved (Canopy, go-control-plane) and both servers
 * stay up; pass p flips the same endpoints on both, so a pair's two passes end on the same state, and
 * their assignments must be equal locality by locality (a mismatch fails the run).
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { serviceSpecToJson } from '../server/src/domain/spec.js';
import { endpointKey, type Endpoint } from '../server/src/domain/service.js';
import { failoverService, makeClients, makeEndpoints, median, percentile } from './data.js';
import { buildPeer } from './peer-build.js';
import { peerPlan, writePeerPlan } from './peer-plan.js';
import { setHealth, startBinary, startCanopy, startGoPeer, type PeerSide } from './peer-sides.js';
import type { PeerFigures, PeerPass, PeerRow } from './peer-figures.js';
import { peerRow } from './peer-figures.js';
import { cpuMs, mainCpuMs, resetPeak, sleep, statusKB, type Child } from './server-procs.js';

const SERVICE = 'svc';
const SETTLE_MS = 2000;

export interface PeerOptions {
  readonly streams: readonly number[];
  readonly endpoints: number;
  readonly localities: number;
  readonly pairs: number;
  /** Seconds of the flip-a-second phase. */
  readonly windowS: number;
  readonly log: (line: string) => void;
}

interface Fixture {
  readonly dir: string;
  readonly config: string;
  readonly plan: string;
  readonly localities: string;
  readonly endpoints: readonly Endpoint[];
}

function fixture(opts: PeerOptions): Fixture {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-bench-peer-'));
  const endpoints = makeEndpoints(opts.endpoints);
  const spec = failoverService(SERVICE, endpoints);
  const config = path.join(dir, 'mesh.json');
  const server = { host: '127.0.0.1', xdsPort: 0, adminPort: 0 };
  writeFileSync(config, JSON.stringify({ server, services: [serviceSpecToJson(spec)] }));
  const placements = makeClients(opts.localities, opts.localities);
  const plan = path.join(dir, 'plan.json');
  writePeerPlan(plan, peerPlan(spec, placements));
  const localities = path.join(dir, 'localities.json');
  writeFileSync(
    localities,
    JSON.stringify(placements.map((p) => [p.locality.region, p.locality.zone, p.locality.subzone])),
  );
  return { dir, config, plan, localities, endpoints };
}

interface Settled {
  readonly timedOut: boolean;
  readonly missing: number;
  readonly delivered: number[][];
  readonly responses: number[];
  readonly recvBytes: number[];
}

async function settle(driver: Child, timeoutMs: number): Promise<Settled> {
  driver.send(`settle 1000 ${timeoutMs}`);
  return (await driver.next('settled', timeoutMs + 30_000)) as unknown as Settled;
}

/** Flips endpoint n unhealthy on the side, with the driver told just before (its clock starts there). */
async function flip(side: PeerSide, driver: Child, e: Endpoint): Promise<void> {
  driver.send(`flip ${e.address} 0`);
  await driver.next('flipped');
  await setHealth(side, SERVICE, endpointKey(e), false);
}

const delivered = (s: Settled): number[] => s.delivered.flat().filter((t) => t >= 0);

async function onePass(
  side: PeerSide,
  binary: string,
  fx: Fixture,
  streams: number,
  pass: number,
  windowS: number,
  checkFile: string,
): Promise<PeerPass> {
  const pid = side.server.proc.pid!;
  await sleep(300);
  resetPeak(pid);
  const c0 = cpuMs(pid);
  const m0 = mainCpuMs(pid);
  const driver = startBinary(
    binary,
    ['--target', side.xds, '--streams', String(streams), '--localities', fx.localities],
    `driver ${side.name}`,
  );
  try {
    const ready = await driver.next('ready', 900_000);
    const initialCpuMs = cpuMs(pid) - c0;
    const initialMainCpuMs = side.mainThread ? mainCpuMs(pid) - m0 : initialCpuMs;
    await sleep(SETTLE_MS);
    const rssKB = statusKB(pid, 'VmRSS');
    // Pass p flips its own endpoints, the same on both sides: 1 + window of them, in distinct leaves.
    const base = pass * (1 + windowS);
    const one0 = cpuMs(pid);
    const oneMain0 = mainCpuMs(pid);
    await flip(side, driver, fx.endpoints[base]!);
    const one = await settle(driver, 120_000);
    const oneCpuMs = cpuMs(pid) - one0;
    const oneMainCpuMs = side.mainThread ? mainCpuMs(pid) - oneMain0 : oneCpuMs;
    const w0 = cpuMs(pid);
    const started = performance.now();
    for (let k = 0; k < windowS; k++) {
      const due = started + k * 1000;
      await sleep(Math.max(0, due - performance.now()));
      await flip(side, driver, fx.endpoints[base + 1 + k]!);
    }
    const window = await settle(driver, 300_000);
    const windowCpuMs = cpuMs(pid) - w0;
    const peakKB = statusKB(pid, 'VmHWM');
    driver.send(`check ${checkFile}`);
    await driver.next('checked', 300_000);
    const oneTimes = delivered(one);
    const windowTimes = delivered(window);
    return {
      initialCpuMs,
      initialMainCpuMs,
      initialWallMs: Number(ready['ms']),
      initialBytes: Number(ready['recvBytes']),
      rssKB,
      peakKB,
      oneCpuMs,
      oneMainCpuMs,
      oneP50Ms: median(oneTimes),
      oneP99Ms: percentile(oneTimes, 99),
      oneLastMs: Math.max(...oneTimes),
      oneBytes: median(one.recvBytes),
      oneMissing: one.missing,
      windowCpuPerS: windowCpuMs / windowS,
      windowP99Ms: percentile(windowTimes, 99),
      windowLate: windowTimes.filter((t) => t > 1000).length / Math.max(1, windowTimes.length),
      windowMissing: window.missing,
      windowBytesPerS: median(window.recvBytes) / windowS,
    };
  } finally {
    await driver.stop();
  }
}

/** Both servers' CLAs decode to different assignments: the comparison is void, and the run fails. */
export class AssignmentMismatch extends Error {
  readonly code = 'PEER_ASSIGNMENT_MISMATCH';
}

/** The assignments both sides' CLAs decode to, locality by locality: equal, or the run fails. */
export function compareAssignments(canopyFile: string, goFile: string, pass: number): number {
  type A = Record<string, { digest: string; endpoints: number; priorities: string[] }>;
  const c = JSON.parse(readFileSync(canopyFile, 'utf8')) as A;
  const g = JSON.parse(readFileSync(goFile, 'utf8')) as A;
  const keys = Object.keys(c);
  if (keys.length === 0 || keys.length !== Object.keys(g).length) {
    throw new AssignmentMismatch(`pass ${pass}: assignments for ${keys.length} vs ${Object.keys(g).length} localities`);
  }
  for (const k of keys) {
    const a = c[k]!;
    const b = g[k];
    if (!b || a.digest !== b.digest || a.endpoints === 0) {
      throw new AssignmentMismatch(
        `pass ${pass}: locality ${k}: Canopy's CLA decodes to ${a.endpoints} endpoints (priorities ${a.priorities.join(', ')}), go-control-plane's to ${b?.endpoints} (${b?.priorities.join(', ')}): not the same assignment`,
      );
    }
  }
  return keys.length;
}

async function row(
  canopy: PeerSide,
  go: PeerSide,
  binary: string,
  fx: Fixture,
  streams: number,
  opts: PeerOptions,
  pass0: number,
): Promise<PeerRow> {
  const passes = { canopy: [] as PeerPass[], go: [] as PeerPass[] };
  const rss0 = { canopy: statusKB(canopy.server.proc.pid!, 'VmRSS'), go: statusKB(go.server.proc.pid!, 'VmRSS') };
  let checked = 0;
  for (let i = 0; i < opts.pairs; i++) {
    const pass = pass0 + i;
    opts.log(`   ${streams} streams, pair ${i + 1} of ${opts.pairs}…`);
    const cf = path.join(fx.dir, `check-canopy-${pass}.json`);
    const gf = path.join(fx.dir, `check-go-${pass}.json`);
    passes.canopy.push(await onePass(canopy, binary, fx, streams, pass, opts.windowS, cf));
    passes.go.push(await onePass(go, binary, fx, streams, pass, opts.windowS, gf));
    checked = compareAssignments(cf, gf, pass);
  }
  return peerRow(streams, passes, rss0, checked);
}

export async function peerBench(opts: PeerOptions): Promise<PeerFigures> {
  const bin = buildPeer(opts.log);
  const fx = fixture(opts);
  let canopy: PeerSide | undefined;
  let go: PeerSide | undefined;
  try {
    canopy = await startCanopy(fx.config);
    go = await startGoPeer(bin.peer, fx.config, fx.plan);
    await sleep(500);
    const rows: PeerRow[] = [];
    let pass0 = 0;
    for (const streams of opts.streams) {
      rows.push(await row(canopy, go, bin.driver, fx, streams, opts, pass0));
      pass0 += opts.pairs;
    }
    return {
      endpoints: opts.endpoints,
      localities: opts.localities,
      pairs: opts.pairs,
      windowS: opts.windowS,
      go: bin.goVersion,
      rows,
    };
  } finally {
    await canopy?.server.stop();
    await go?.server.stop();
    rmSync(fx.dir, { recursive: true, force: true });
  }
}

/**
 * Section P. `--peer-streams=2000,10000` (default; --quick: 200), `--peer-pairs=5`, `--peer-window=S`
 * (the flip-a-second phase; default 60 s, --quick 10 s).
 */
export async function peerSection(
  quick: boolean,
  arg: (name: string) => string | undefined,
  log: (text: string) => void,
): Promise<PeerFigures | { skipped: string }> {
  const streams = (arg('peer-streams') ?? (quick ? '200' : '2000,10000')).split(',').map(Number);
  const shape = quick ? { endpoints: 1000, localities: 100 } : { endpoints: 10000, localities: 1000 };
  log(`P. against go-control-plane: ${streams.join(', ')} streams, ${shape.endpoints} endpoints…`);
  try {
    return await peerBench({
      ...shape,
      streams,
      pairs: Number(arg('peer-pairs') ?? 5),
      windowS: Number(arg('peer-window') ?? (quick ? 10 : 60)),
      log,
    });
  } catch (err) {
    if (err instanceof AssignmentMismatch) throw err; // not a section that cannot run: a failed check
    return { skipped: (err as Error).message };
  }
}
