/**
 * Program cost per call from the kernel's own counters, against an empty
 * program on the same hook. Run with `npm run bench:kernel -- --program`.
 */
import { loadAddon, type BpfAddon, type Hook } from '../server/src/agent/bpf.js';
import { Datapath } from '../server/src/agent/datapath.js';
import type { IncomingTree } from '../server/src/agent/planner.js';
import { Mesh } from '../server/src/domain/mesh.js';
import type { ServiceSpec } from '../server/src/domain/service.js';
import { packagePath } from '../server/src/platform/paths.js';
import { contentHash } from '../server/src/resources/resource.js';
import { decodeLocalityTree, encodeLocalityTree } from '../server/src/resources/tree-codec.js';
import { kernelEnv, testCgroup } from '../e2e/support/kernel.js';
import { failoverService, makeEndpoints, median } from './data.js';
import { compileConnectBench, connectNs, NODE } from './kernel-fixtures.js';
import { pickDifference, pickedBackends } from './kernel-picks.js';

export interface ProgramRow {
  readonly ns: number;
  readonly spread: string;
  /** Above the floor (the empty program on the same hook), median of the per-round differences. */
  readonly aboveFloor: number;
  /** With --against: median of the per-round differences, this build minus the other (negative: faster). */
  readonly minusAgainst?: number;
}

export interface ProgramFigures {
  readonly skipped?: string;
  readonly endpoints?: number;
  readonly rounds?: number;
  readonly callsPerRound?: number;
  readonly rows?: Record<string, ProgramRow>;
  /** Distinct backends each VIP row's connects reached (with --against: the same set for both builds). */
  readonly picks?: Record<string, number>;
  readonly method?: string;
}

/** The N-endpoint 3-level service with backends on 127.0.0.0/8 (UDP sendto really sends). */
function loopbackService(name: string, n: number, vip: string, port: number, mode: 'failover' | 'random'): ServiceSpec {
  const eps = makeEndpoints(n, Math.max(1, Math.min(1000, Math.floor(n / 100)))).map((e, i) => ({
    ...e,
    address: `127.${((i >> 16) & 127) + 1}.${(i >> 8) & 255}.${i & 255}`,
    port,
  }));
  const spec = { ...failoverService(name, eps), vip, port };
  return { ...spec, loadBalancing: { ...spec.loadBalancing, mode, crossNetworkFailover: false } };
}

/** One build of the object, installed on its own cgroups with the bench's two services. */
interface Build {
  readonly tag: string;
  readonly dp: Datapath;
  readonly cg: ReturnType<typeof testCgroup>;
  readonly pod: string;
  readonly plain: string;
}

function install(tag: string, object: string | undefined, trees: IncomingTree[]): Build {
  const cg = testCgroup(`progbench${tag ? '-b' : ''}`);
  const pod = cg.child('pod'); // a workload with its own entry
  const plain = cg.child('plain'); // no entry: the node's locality
  try {
    const dp = Datapath.open({
      pinDir: cg.pinDir,
      cgroup: cg.dir,
      graceMs: 10,
      ...(object ? { objectPath: object } : {}),
    });
    dp.setWorkloads(NODE, [{ cgroup: pod, placement: NODE }]);
    const r = dp.apply(trees);
    if (r.rejected.length > 0) throw new Error(r.rejected.map((x) => x.detail).join('; '));
    return { tag, dp, cg, pod, plain };
  } catch (err) {
    cg.cleanup();
    throw err;
  }
}

interface Kind {
  readonly row: string;
  readonly cgroup: string;
  readonly addr: string;
  readonly sendto: boolean;
  readonly prog: number;
  readonly floor: number;
  readonly build?: Build;
  /** A VIP row whose picks are compared: the backends it must reach (undefined: any of the service's). */
  readonly leaf?: ReadonlySet<string> | 'any';
  /** Around the row's calls: the agent without --workload entries. */
  readonly bare?: boolean;
}

const VIP3 = '127.100.9.3';
const VIPR = '127.100.9.4';
const PORT3 = 9191;

function buildKinds(b: Build, floorFd: (hook: Hook) => number, leaf: ReadonlySet<string>): Kind[] {
  const c4 = b.dp.programFd(4)!;
  const f4 = floorFd(4);
  const t = b.tag;
  return [
    { row: `non-VIP connect${t}`, cgroup: b.pod, addr: '127.0.0.1', sendto: false, prog: c4, floor: f4, build: b },
    {
      row: `VIP connect, 3-level tree, workload entry${t}`,
      cgroup: b.pod,
      addr: VIP3,
      sendto: false,
      prog: c4,
      floor: f4,
      build: b,
      leaf,
    },
    {
      row: `VIP connect, 3-level tree, node locality${t}`,
      cgroup: b.plain,
      addr: VIP3,
      sendto: false,
      prog: c4,
      floor: f4,
      build: b,
      leaf,
    },
    {
      row: `VIP connect, 3-level tree, no workload entries${t}`,
      cgroup: b.plain,
      addr: VIP3,
      sendto: false,
      prog: c4,
      floor: f4,
      build: b,
      leaf,
      bare: true,
    },
    {
      row: `VIP connect, random mode${t}`,
      cgroup: b.pod,
      addr: VIPR,
      sendto: false,
      prog: c4,
      floor: f4,
      build: b,
      leaf: 'any',
    },
  ];
}

function sendKind(b: Build, floorFd: (hook: Hook) => number, leaf: ReadonlySet<string>): Kind {
  const prog = b.dp.programFd('sendmsg4')!;
  const floor = floorFd('sendmsg4');
  return {
    row: `UDP sendmsg to a VIP, 3-level tree${b.tag}`,
    cgroup: b.pod,
    addr: VIP3,
    sendto: true,
    prog,
    floor,
    build: b,
    leaf,
  };
}

/** Runs one kind's calls with the workload entries it needs; returns the program's ns per call. */
function timeKind(bpf: BpfAddon, bin: string, k: Kind, calls: number): number {
  if (k.bare) k.build!.dp.setWorkloads(NODE, []);
  try {
    const a = bpf.progStats(k.prog);
    connectNs(bin, k.cgroup, k.addr, PORT3, calls, k.sendto);
    const b = bpf.progStats(k.prog);
    return (b.runTimeNs - a.runTimeNs) / Math.max(1, b.runCnt - a.runCnt);
  } finally {
    if (k.bare) k.build!.dp.setWorkloads(NODE, [{ cgroup: k.build!.pod, placement: NODE }]);
  }
}

/**
 * The backends each VIP row reaches: the caller's leaf for the tree rows
 * (every one of its backends, none else), any of the service's for random
 * mode; with two builds, the same set for both.
 */
function checkPicks(bpf: BpfAddon, bin: string, kinds: readonly Kind[], all: ReadonlySet<string>, calls: number) {
  const picks: Record<string, number> = {};
  const byRow = new Map<string, Set<string>>();
  for (const k of kinds) {
    if (!k.leaf || !k.build) continue;
    if (k.bare) k.build.dp.setWorkloads(NODE, []);
    let got: Set<string>;
    try {
      got = pickedBackends(bpf, bin, k.build.cg.pinDir, {
        cgroup: k.cgroup,
        vip: k.addr,
        port: PORT3,
        calls,
        sendto: k.sendto,
      });
    } finally {
      if (k.bare) k.build.dp.setWorkloads(NODE, [{ cgroup: k.build.pod, placement: NODE }]);
    }
    const want = k.leaf === 'any' ? undefined : k.leaf;
    const stray = [...got].filter((ip) => !(want ?? all).has(ip));
    if (stray.length > 0)
      throw new Error(`${k.row}: connects reached ${stray.length} backends outside the expected set`);
    if (want && pickDifference(got, want)) throw new Error(`${k.row}: ${pickDifference(got, want)}`);
    picks[k.row] = got.size;
    const base = k.row.replace(k.build.tag, '');
    const other = byRow.get(base);
    if (other && want && pickDifference(got, other))
      throw new Error(`${base}: the builds differ: ${pickDifference(other, got)}`);
    byRow.set(base, got);
  }
  return picks;
}

/**
 * Program time per run from the kernel's own counters (BPF_ENABLE_STATS:
 * run_time_ns / run_cnt of the program, per connect or sendto), for each
 * kind of call, against an empty program on the same hook (the floor) run in
 * the same rounds. Rounds interleave every kind; the median of the rounds and
 * their spread are reported. With `against` (another build of the object),
 * both builds run every kind in every round, each on its own cgroups, and
 * their picks are checked to be the same backends.
 */
export async function runProgramBench(quick: boolean, object?: string, against?: string): Promise<ProgramFigures> {
  const env = kernelEnv();
  if (env.reason) return { skipped: env.reason };
  const bin = compileConnectBench();
  if (!bin) return { skipped: 'no C compiler for the connect() benchmark' };
  const bpf = loadAddon();
  const n = quick ? 20_000 : 100_000;
  const calls = quick ? 20_000 : 100_000;
  const rounds = quick ? 5 : 7;
  const specs = [
    loopbackService('tree3', n, VIP3, PORT3, 'failover'),
    loopbackService('random', n, VIPR, PORT3, 'random'),
  ];
  const mesh = new Mesh();
  const trees = specs.map((spec) => {
    mesh.put(spec);
    const st = mesh.get(spec.name)!;
    const bytes = encodeLocalityTree(st.spec, st.tree.compile());
    return { tree: decodeLocalityTree(bytes), hash: contentHash(bytes) };
  });
  const all = new Set(specs[0]!.endpoints.map((e) => e.address));
  const here = NODE.locality;
  const leaf = new Set(
    specs[0]!.endpoints
      .filter(
        (e) =>
          e.locality.region === here.region && e.locality.zone === here.zone && e.locality.subzone === here.subzone,
      )
      .map((e) => e.address),
  );
  const builds: Build[] = [];
  const floorCg = testCgroup('progbench-floor');
  const floorDir = floorCg.child('floor');
  let statsFd: number | undefined;
  const floorFds: { fd: number; hook: Hook }[] = [];
  try {
    builds.push(install('', object, trees));
    if (against) builds.push(install(' [against]', against, trees));
    const floor = bpf.load(packagePath('bpf', 'build', 'floor.bpf.o'), floorCg.pinDir, {});
    for (const [name, hook] of [
      ['floor_connect4', 4],
      ['floor_sendmsg4', 'sendmsg4'],
    ] as const) {
      const fd = floor.programs[name]!;
      bpf.attachConnect4(fd, floorDir, hook);
      floorFds.push({ fd, hook });
    }
    const floorFd = (hook: Hook) => floorFds.find((f) => f.hook === hook)!.fd;
    statsFd = bpf.enableStats();
    const floorKind = (row: string, hook: Hook, addr: string, sendto: boolean): Kind => ({
      row,
      cgroup: floorDir,
      addr,
      sendto,
      prog: floorFd(hook),
      floor: floorFd(hook),
    });
    // Every kind of one build next to the same kind of the other, so a burst of load lands on both alike;
    // which of the two goes first alternates by round.
    const perBuild = builds.map((b) => [...buildKinds(b, floorFd, leaf), sendKind(b, floorFd, leaf)]);
    const pairs = (round: number) =>
      perBuild[0]!.map((_, i) => {
        const pair = perBuild.map((p) => p[i]!);
        return round % 2 ? pair.reverse() : pair;
      });
    const ordered = (round: number): Kind[] => {
      const p = pairs(round);
      return [
        floorKind('floor connect (empty program)', 4, VIP3, false),
        ...p.slice(0, -1).flat(),
        floorKind('floor sendmsg (empty program)', 'sendmsg4', '127.0.0.1', true),
        ...p[p.length - 1]!,
      ];
    };
    const kinds = ordered(0);
    const per = new Map(kinds.map((k) => [k.row, [] as number[]]));
    const floorOf = new Map<number, number[]>();
    for (let round = 0; round < rounds; round++) {
      for (const k of ordered(round)) {
        const ns = timeKind(bpf, bin, k, calls);
        per.get(k.row)!.push(ns);
        if (k.prog === k.floor) floorOf.set(k.prog, [...(floorOf.get(k.prog) ?? []), ns]);
      }
    }
    const picks = checkPicks(bpf, bin, kinds, all, quick ? 10_000 : 20_000);
    return {
      endpoints: n,
      rounds,
      callsPerRound: calls,
      rows: programRows(kinds, per, floorOf, builds[1]?.tag),
      picks,
      method:
        'kernel run_time_ns / run_cnt of the program (BPF_ENABLE_STATS) over each batch of calls; every kind once per round, rounds interleaved (with --against, both builds in every round, kind by kind); median of the rounds, spread min–max; aboveFloor: median of per-round differences to the empty program on the same hook; picks: distinct backends reached by real connects (canopy_revnat), checked against the caller leaf (and between builds)',
    };
  } finally {
    if (statsFd !== undefined) bpf.close(statsFd);
    for (const f of floorFds) {
      try {
        bpf.detachConnect4(f.fd, floorDir, f.hook);
      } catch {
        // already detached
      }
      bpf.close(f.fd);
    }
    for (const b of builds) {
      b.dp.close({ detach: true, cgroup: b.cg.dir });
      b.cg.cleanup();
    }
    floorCg.cleanup();
  }
}

function programRows(
  kinds: readonly Kind[],
  per: ReadonlyMap<string, number[]>,
  floorOf: ReadonlyMap<number, number[]>,
  againstTag: string | undefined,
): Record<string, ProgramRow> {
  const rows: Record<string, ProgramRow> = {};
  for (const k of kinds) {
    const xs = per.get(k.row)!;
    const fl = floorOf.get(k.floor)!;
    const other = againstTag && k.build && !k.build.tag ? per.get(`${k.row}${againstTag}`) : undefined;
    rows[k.row] = {
      ns: Math.round(median(xs)),
      spread: `${Math.min(...xs).toFixed(0)}–${Math.max(...xs).toFixed(0)}`,
      aboveFloor: Math.round(median(xs.map((x, i) => x - fl[i]!))),
      ...(other ? { minusAgainst: Math.round(median(xs.map((x, i) => x - other[i]!))) } : {}),
    };
  }
  return rows;
}
