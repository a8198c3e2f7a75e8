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
 * locality, what the CLA decodes to, and last a re-sync: the driver goes, a new one brings every stream
 * back to the warm server (server CPU until each holds its CLA again).
 *
 * The go-control-plane peer runs in each of its modes (`--peer-modes=protos,encoded`, the default: the
 * idiomatic cache of protos and the strongest, each group encoded once; peer-sides.ts), one server per
 * mode. Passes are interleaved (Canopy, then each peer mode) and every server stays up; pass p flips the
 * same endpoints on all, so a pair's passes end on the same state, and their assignments must be equal
 * locality by locality (a mismatch fails the run). Each mode gets its own rows, against the same Canopy passes.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { serviceSpecToJson } from '../server/src/domain/spec.js';
import { endpointKey, type Endpoint } from '../server/src/domain/service.js';
import { failoverService, makeClients, makeEndpoints, median, percentile } from './data.js';
import { buildPeer } from './peer-build.js';
import { peerPlan, writePeerPlan } from './peer-plan.js';
import {
  PEER_MODES,
  setHealth,
  startBinary,
  startCanopy,
  startGoPeer,
  type PeerMode,
  type PeerSide,
} from './peer-sides.js';
import { MemoryFloor, MemoryGuard } from './peer-limits.js';
import type { PeerFigures, PeerPass, PeerRow } from './peer-figures.js';
import { peerRow } from './peer-figures.js';
import { cpuMs, mainCpuMs, resetPeak, sleep, statusKB, systemCpuMs, type Child } from './server-procs.js';
import { AssignmentMismatch, compareAssignments } from './peer-check.js';

const SERVICE = 'svc';
const SETTLE_MS = 2000;
/** Connections per client source address (127.0.0.2, …): well inside one address's ephemeral ports. */
const STREAMS_PER_SOURCE = 4000;

export interface PeerOptions {
  readonly streams: readonly number[];
  readonly endpoints: number;
  readonly localities: number;
  readonly pairs: number;
  /** Seconds of the flip-a-second phase. */
  readonly windowS: number;
  /** Stream counts of the delta rows (initial sync and one flip; no window). */
  readonly delta: readonly number[];
  /** A pass stops (and the section with it) when the machine's available memory falls under this. */
  readonly memFloorMB: number;
  /** The go-control-plane peer's modes to run, each its own server and rows. */
  readonly modes: readonly PeerMode[];
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

/** What one pass runs: its streams and protocol, its flip-a-second window, the endpoints it flips from. */
interface PassPlan {
  readonly streams: number;
  readonly delta: boolean;
  readonly windowS: number;
  /** Index of its first endpoint to flip: it flips 1 + windowS from here, the same on both sides. */
  readonly flip0: number;
  readonly checkFile: string;
  readonly memFloorMB: number;
}

function startDriver(binary: string, side: PeerSide, fx: Fixture, plan: PassPlan) {
  const args = ['--target', side.xds, '--streams', String(plan.streams), '--localities', fx.localities];
  args.push('--sources', String(Math.ceil(plan.streams / STREAMS_PER_SOURCE)));
  if (plan.delta) args.push('--delta');
  return startBinary(binary, args, `driver ${side.name}`);
}

async function onePass(side: PeerSide, binary: string, fx: Fixture, plan: PassPlan): Promise<PeerPass> {
  const pid = side.server.proc.pid!;
  await sleep(300);
  const load1 = os.loadavg()[0]!;
  resetPeak(pid);
  const c0 = cpuMs(pid);
  const m0 = mainCpuMs(pid);
  const s0 = systemCpuMs(pid);
  const driver = startDriver(binary, side, fx, plan);
  const guard = new MemoryGuard(plan.memFloorMB, `${side.name}, ${plan.streams} streams`, () => driver.proc.kill());
  try {
    const measured = await guard.race(measurePass(side, driver, fx, plan, guard, { c0, m0, s0 }));
    await driver.stop();
    return { ...measured, ...(await guard.race(resync(side, binary, fx, plan))), load1 };
  } finally {
    guard.close();
    await driver.stop();
  }
}

/** Every stream reconnects to the warm server: a new driver with the same nodes, until each holds its CLA. */
async function resync(side: PeerSide, binary: string, fx: Fixture, plan: PassPlan) {
  const pid = side.server.proc.pid!;
  await sleep(SETTLE_MS); // the old streams' close is not the re-sync's work
  const c0 = cpuMs(pid);
  const s0 = systemCpuMs(pid);
  const driver = startDriver(binary, side, fx, plan);
  try {
    const ready = await driver.next('ready', 900_000);
    return {
      resyncCpuMs: cpuMs(pid) - c0,
      resyncSysCpuMs: systemCpuMs(pid) - s0,
      resyncWallMs: Number(ready['ms']),
    };
  } finally {
    await driver.stop();
  }
}

async function measurePass(
  side: PeerSide,
  driver: Child,
  fx: Fixture,
  plan: PassPlan,
  guard: MemoryGuard,
  at: { c0: number; m0: number; s0: number },
): Promise<Omit<PeerPass, 'load1' | 'resyncCpuMs' | 'resyncSysCpuMs' | 'resyncWallMs'>> {
  const pid = side.server.proc.pid!;
  const { c0, m0, s0 } = at;
  const { windowS, flip0: base } = plan;
  const ready = await driver.next('ready', 900_000);
  const initialCpuMs = cpuMs(pid) - c0;
  const initialMainCpuMs = side.mainThread ? mainCpuMs(pid) - m0 : initialCpuMs;
  const initialSysCpuMs = systemCpuMs(pid) - s0;
  await sleep(SETTLE_MS);
  const rssKB = statusKB(pid, 'VmRSS');
  // A pass flips its own endpoints, the same on both sides: 1 + window of them, in distinct leaves.
  const one0 = cpuMs(pid);
  const oneMain0 = mainCpuMs(pid);
  const oneSys0 = systemCpuMs(pid);
  await flip(side, driver, fx.endpoints[base]!);
  const one = await settle(driver, 120_000);
  const oneCpuMs = cpuMs(pid) - one0;
  const oneMainCpuMs = side.mainThread ? mainCpuMs(pid) - oneMain0 : oneCpuMs;
  const oneSysCpuMs = systemCpuMs(pid) - oneSys0;
  const w0 = cpuMs(pid);
  const started = performance.now();
  for (let k = 0; k < windowS; k++) {
    const due = started + k * 1000;
    await sleep(Math.max(0, due - performance.now()));
    await guard.race(flip(side, driver, fx.endpoints[base + 1 + k]!));
  }
  const window = windowS > 0 ? await settle(driver, 300_000) : undefined;
  const windowCpuMs = cpuMs(pid) - w0;
  const peakKB = statusKB(pid, 'VmHWM');
  driver.send(`check ${plan.checkFile}`);
  await driver.next('checked', 300_000);
  const oneTimes = delivered(one);
  const windowTimes = window ? delivered(window) : [];
  return {
    initialCpuMs,
    initialMainCpuMs,
    initialSysCpuMs,
    initialWallMs: Number(ready['ms']),
    initialBytes: Number(ready['recvBytes']),
    rssKB,
    peakKB,
    oneCpuMs,
    oneMainCpuMs,
    oneSysCpuMs,
    oneP50Ms: median(oneTimes),
    oneP99Ms: percentile(oneTimes, 99),
    oneLastMs: Math.max(...oneTimes),
    oneBytes: median(one.recvBytes),
    oneMissing: one.missing,
    ...windowFigures(window, windowTimes, windowCpuMs, windowS),
  };
}

function windowFigures(window: Settled | undefined, times: number[], cpuMsTotal: number, windowS: number) {
  if (!window)
    return { windowCpuPerS: NaN, windowP99Ms: NaN, windowLate: NaN, windowMissing: NaN, windowBytesPerS: NaN };
  return {
    windowCpuPerS: cpuMsTotal / windowS,
    windowP99Ms: percentile(times, 99),
    windowLate: times.filter((t) => t > 1000).length / Math.max(1, times.length),
    windowMissing: window.missing,
    windowBytesPerS: median(window.recvBytes) / windowS,
  };
}

/** The endpoints flipped so far in the run: each pair flips the next ones, so that every flip is a change. */
interface FlipCursor {
  next: number;
}

async function row(
  sides: { canopy: PeerSide; peers: readonly PeerSide[] },
  binary: string,
  fx: Fixture,
  shape: { streams: number; delta: boolean; windowS: number },
  opts: PeerOptions,
  cursor: FlipCursor,
): Promise<PeerRow[]> {
  const { canopy, peers } = sides;
  const { streams, delta } = shape;
  const canopyPasses: PeerPass[] = [];
  const peerPasses = peers.map(() => [] as PeerPass[]);
  const rss = (s: PeerSide) => statusKB(s.server.proc.pid!, 'VmRSS');
  const rss0 = { canopy: rss(canopy), peers: peers.map(rss) };
  let checked = 0;
  for (let i = 0; i < opts.pairs; i++) {
    const flip0 = cursor.next;
    cursor.next += 1 + shape.windowS;
    opts.log(`   ${streams} streams${delta ? ', delta' : ''}, pair ${i + 1} of ${opts.pairs}…`);
    const tag = `${delta ? 'delta' : 'sotw'}-${streams}-${i}`;
    const plan = (side: string): PassPlan => ({
      ...shape,
      flip0,
      checkFile: path.join(fx.dir, `check-${side}-${tag}.json`),
      memFloorMB: opts.memFloorMB,
    });
    const cp = plan('canopy');
    canopyPasses.push(await onePass(canopy, binary, fx, cp));
    const line: Record<string, unknown> = { tag, canopy: canopyPasses.at(-1) };
    for (const [k, peer] of peers.entries()) {
      const gp = plan(`go-${peer.mode}`);
      peerPasses[k]!.push(await onePass(peer, binary, fx, gp));
      checked = compareAssignments(cp.checkFile, gp.checkFile, `${tag} (${peer.mode})`);
      line[`go-${peer.mode}`] = peerPasses[k]!.at(-1);
    }
    // Each pair as it ends, checked, one JSON line: a run stopped early (a shared machine, a deadline) keeps its pairs.
    opts.log(`   pair ${JSON.stringify(line)}`);
  }
  return peers.map((peer, k) =>
    peerRow(
      streams,
      { canopy: canopyPasses, go: peerPasses[k]! },
      { canopy: rss0.canopy, go: rss0.peers[k]! },
      checked,
      delta ? 'delta' : 'sotw',
      peer.mode ?? 'protos',
    ),
  );
}

export async function peerBench(opts: PeerOptions): Promise<PeerFigures> {
  const bin = buildPeer(opts.log);
  const fx = fixture(opts);
  let canopy: PeerSide | undefined;
  const peers: PeerSide[] = [];
  try {
    const most = Math.max(...opts.streams, ...opts.delta);
    canopy = await startCanopy(fx.config, most);
    for (const mode of opts.modes) peers.push(await startGoPeer(bin.peer, fx.config, fx.plan, most, mode));
    await sleep(500);
    const rows: PeerRow[] = [];
    const cursor: FlipCursor = { next: 0 };
    const sides = { canopy, peers };
    for (const streams of opts.streams) {
      rows.push(...(await row(sides, bin.driver, fx, { streams, delta: false, windowS: opts.windowS }, opts, cursor)));
    }
    for (const streams of opts.delta) {
      rows.push(...(await row(sides, bin.driver, fx, { streams, delta: true, windowS: 0 }, opts, cursor)));
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
    for (const peer of peers) await peer.server.stop();
    rmSync(fx.dir, { recursive: true, force: true });
  }
}

/**
 * Section P. `--peer-streams=2000,10000` (default; --quick: 200), `--peer-pairs=5`, `--peer-window=S`
 * (the flip-a-second phase; default 60 s, --quick 10 s), `--peer-delta=2000` (the delta rows' streams;
 * default the first SotW count; 0: none), `--peer-mem-floor=MB` (default 2048: a pass stops when the
 * machine's available memory falls below it), `--peer-modes=protos,encoded` (the default: both).
 */
export async function peerSection(
  quick: boolean,
  arg: (name: string) => string | undefined,
  log: (text: string) => void,
): Promise<PeerFigures | { skipped: string }> {
  const streams = (arg('peer-streams') ?? (quick ? '200' : '2000,10000'))
    .split(',')
    .map(Number)
    .filter((n) => n > 0);
  const shape = quick ? { endpoints: 1000, localities: 100 } : { endpoints: 10000, localities: 1000 };
  const delta = (arg('peer-delta') ?? String(streams[0] ?? 0))
    .split(',')
    .map(Number)
    .filter((n) => n > 0);
  log(
    `P. against go-control-plane: ${[...streams, ...delta.map((n) => `${n} delta`)].join(', ')} streams, ${shape.endpoints} endpoints…`,
  );
  try {
    return await peerBench({
      ...shape,
      streams,
      pairs: Number(arg('peer-pairs') ?? 5),
      windowS: Number(arg('peer-window') ?? (quick ? 10 : 60)),
      delta,
      memFloorMB: Number(arg('peer-mem-floor') ?? 2048),
      modes: peerModes(arg('peer-modes')),
      log,
    });
  } catch (err) {
    if (err instanceof AssignmentMismatch) throw err; // not a section that cannot run: a failed check
    if (err instanceof MemoryFloor) log(`P. stopped: ${err.message}`);
    return { skipped: (err as Error).message };
  }
}

function peerModes(list: string | undefined): PeerMode[] {
  const modes = (list ?? PEER_MODES.join(',')).split(',').filter((m) => m !== '');
  const unknown = modes.filter((m) => !(PEER_MODES as readonly string[]).includes(m));
  if (unknown.length > 0 || modes.length === 0)
    throw new Error(`--peer-modes: a list of ${PEER_MODES.join(', ')}, not ${list ?? ''}`);
  return modes as PeerMode[];
}
