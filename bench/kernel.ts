/**
 * Kernel datapath figures, each against a baseline in the same run:
 * - publish time of one tree of N endpoints: batch updates vs one syscall per entry;
 * - map writes and apply time for one endpoint change (a health flip) in that tree,
 *   written in place (in-place.ts) — the full fill + switch above is its baseline;
 * - ns per connect() with the program attached (to a VIP: the tree walk; to
 *   any other address: one lookup) vs a cgroup without it;
 * - map lookups per VIP connect, counted by the program itself;
 * - bytes per endpoint of the compiled tree on the wire.
 * Needs root, cgroup v2, bpffs and `npm run build:bpf`; otherwise it says why
 * and reports nothing. Run alone: node dist/bench/kernel.js [--quick]
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadAddon, type Hook } from '../server/src/agent/bpf.js';
import { Datapath } from '../server/src/agent/datapath.js';
import { TreeInbox } from '../server/src/agent/tree-inbox.js';
import { TREE_TYPE } from '../server/src/resources/type-urls.js';
import { messageType } from '../server/src/wire/protos.js';
import { tryDecodeLocalityTree } from '../server/src/resources/tree-codec.js';
import type { Placement } from '../server/src/domain/locality.js';
import { Mesh } from '../server/src/domain/mesh.js';
import type { ServiceSpec } from '../server/src/domain/service.js';
import { packagePath } from '../server/src/paths.js';
import { contentHash } from '../server/src/resources/resource.js';
import { decodeLocalityTree, encodeLocalityTree } from '../server/src/resources/tree-codec.js';
import { kernelEnv, testCgroup } from '../e2e/support/kernel.js';
import { failoverService, makeEndpoints, median } from './data.js';

export interface KernelFigures {
  readonly skipped?: string;
  readonly endpoints?: number;
  readonly publishBatchMs?: number;
  readonly publishSingleMs?: number;
  readonly publishRatio?: number;
  /** One endpoint leaves (or comes back to) the N-endpoint tree: map writes and apply ms, median and range. */
  readonly oneChangeMapWrites?: number;
  readonly oneChangeMapWritesRange?: string;
  readonly oneChangeApplyMs?: number;
  readonly oneChangeApplyMsRange?: string;
  readonly oneChangeApplyCpuMs?: number;
  readonly oneChangeApplyCpuMsRange?: string;
  /** A connect() to an IPv6 VIP (cgroup/connect6, the same tree). */
  readonly nsConnectVipV6?: number;
  readonly nsConnectWithout?: number;
  readonly nsConnectOtherAddress?: number;
  readonly nsConnectVip?: number;
  readonly programNsPerVipConnect?: number;
  readonly lookupsPerVipConnect?: number;
  readonly lookupBound?: string;
  readonly treeBytesPerEndpoint?: number;
}

const VIP = '127.100.9.1';
/** Nothing listens on it, nor needs to: a UDP connect() only routes (the VIP itself is on no interface). */
const VIP6 = 'fd00:c::900';
const PORT = 9090;

function bigService(n: number): ServiceSpec {
  return {
    ...failoverService('big', makeEndpoints(n, Math.max(1, Math.min(1000, Math.floor(n / 100))))),
    vip: VIP,
    port: PORT,
  };
}

function connectNs(bin: string, cgroup: string, addr: string, port: number, n: number, sendto = false): number {
  // The shell joins the cgroup, then becomes the benchmark.
  const out = execFileSync(
    'sh',
    ['-c', `echo $$ > "${cgroup}/cgroup.procs" && exec "${bin}" ${addr} ${port} ${n}${sendto ? ' sendto' : ''}`],
    {
      encoding: 'utf8',
    },
  );
  return (JSON.parse(out) as { ns_per_connect: number }).ns_per_connect;
}

function compileConnectBench(): string | undefined {
  const cc = ['cc', 'gcc', 'clang'].find((c) => spawnSync(c, ['--version'], { stdio: 'ignore' }).status === 0);
  if (!cc) return undefined;
  const bin = path.join(mkdtempSync(path.join(os.tmpdir(), 'canopy-bench-')), 'connect-bench');
  execFileSync(cc, ['-O2', '-o', bin, packagePath('bpf', 'connect-bench.c')]);
  return bin;
}

/** One row of program cost: ns of program time per run, median of the rounds and their spread. */
export interface ProgramRow {
  readonly ns: number;
  readonly spread: string;
  /** Above the floor (the empty program on the same hook), median of the per-round differences. */
  readonly aboveFloor: number;
}

export interface ProgramFigures {
  readonly skipped?: string;
  readonly endpoints?: number;
  readonly rounds?: number;
  readonly callsPerRound?: number;
  readonly rows?: Record<string, ProgramRow>;
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

const NODE: Placement = {
  locality: { region: 'r1', zone: 'z1', subzone: 's0' },
  network: '',
  node: '',
  cluster: '',
  labels: {},
};

/**
 * Program time per run from the kernel's own counters (BPF_ENABLE_STATS:
 * run_time_ns / run_cnt of the program, per connect or sendto), for each
 * kind of call, against an empty program on the same hook (the floor) run in
 * the same rounds. Rounds interleave every kind; the median of the rounds and
 * their spread are reported.
 */
export async function runProgramBench(quick: boolean, object?: string): Promise<ProgramFigures> {
  const env = kernelEnv();
  if (env.reason) return { skipped: env.reason };
  const bin = compileConnectBench();
  if (!bin) return { skipped: 'no C compiler for the connect() benchmark' };
  const bpf = loadAddon();
  const n = quick ? 20_000 : 100_000;
  const calls = quick ? 20_000 : 100_000;
  const rounds = quick ? 5 : 7;
  const PORT3 = 9191;
  const VIP3 = '127.100.9.3';
  const VIPR = '127.100.9.4';
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
  const cg = testCgroup('progbench');
  const pod = cg.child('pod'); // a workload with its own entry
  const plain = cg.child('plain'); // no entry: the node's locality
  const floorCg = cg.child('floor');
  const floorPin = `${cg.pinDir}-floor`;
  let dp: Datapath | undefined;
  let statsFd: number | undefined;
  const floorFds: { fd: number; hook: Hook }[] = [];
  try {
    dp = Datapath.open({ pinDir: cg.pinDir, cgroup: cg.dir, graceMs: 10, ...(object ? { objectPath: object } : {}) });
    dp.setWorkloads(NODE, [{ cgroup: pod, placement: NODE }]);
    const r = dp.apply(trees);
    if (r.rejected.length > 0) throw new Error(r.rejected.map((x) => x.detail).join('; '));
    const floor = bpf.load(packagePath('bpf', 'build', 'floor.bpf.o'), floorPin, {});
    for (const [name, hook] of [
      ['floor_connect4', 4],
      ['floor_sendmsg4', 'sendmsg4'],
    ] as const) {
      const fd = floor.programs[name]!;
      bpf.attachConnect4(fd, floorCg, hook);
      floorFds.push({ fd, hook });
    }
    const floorFd = (hook: Hook) => floorFds.find((f) => f.hook === hook)!.fd;
    statsFd = bpf.enableStats();
    const kinds: { row: string; cgroup: string; addr: string; sendto: boolean; prog: number; floor: number }[] = [
      {
        row: 'floor connect (empty program)',
        cgroup: floorCg,
        addr: VIP3,
        sendto: false,
        prog: floorFd(4),
        floor: floorFd(4),
      },
      {
        row: 'non-VIP connect',
        cgroup: pod,
        addr: '127.0.0.1',
        sendto: false,
        prog: dp.programFd(4)!,
        floor: floorFd(4),
      },
      {
        row: 'VIP connect, 3-level tree, workload entry',
        cgroup: pod,
        addr: VIP3,
        sendto: false,
        prog: dp.programFd(4)!,
        floor: floorFd(4),
      },
      {
        row: 'VIP connect, 3-level tree, node locality',
        cgroup: plain,
        addr: VIP3,
        sendto: false,
        prog: dp.programFd(4)!,
        floor: floorFd(4),
      },
      {
        row: 'VIP connect, random mode',
        cgroup: pod,
        addr: VIPR,
        sendto: false,
        prog: dp.programFd(4)!,
        floor: floorFd(4),
      },
      {
        row: 'floor sendmsg (empty program)',
        cgroup: floorCg,
        addr: '127.0.0.1',
        sendto: true,
        prog: floorFd('sendmsg4'),
        floor: floorFd('sendmsg4'),
      },
      {
        row: 'UDP sendmsg to a VIP, 3-level tree',
        cgroup: pod,
        addr: VIP3,
        sendto: true,
        prog: dp.programFd('sendmsg4')!,
        floor: floorFd('sendmsg4'),
      },
    ];
    const per = new Map(kinds.map((k) => [k.row, [] as number[]]));
    const floorOf = new Map<number, number[]>();
    for (let round = 0; round < rounds; round++) {
      for (const k of kinds) {
        const a = bpf.progStats(k.prog);
        connectNs(bin, k.cgroup, k.addr, PORT3, calls, k.sendto);
        const b = bpf.progStats(k.prog);
        const ns = (b.runTimeNs - a.runTimeNs) / Math.max(1, b.runCnt - a.runCnt);
        per.get(k.row)!.push(ns);
        if (k.prog === k.floor) floorOf.set(k.prog, [...(floorOf.get(k.prog) ?? []), ns]);
      }
    }
    const rows: Record<string, ProgramRow> = {};
    for (const k of kinds) {
      const xs = per.get(k.row)!;
      const fl = floorOf.get(k.floor)!;
      rows[k.row] = {
        ns: Math.round(median(xs)),
        spread: `${Math.min(...xs).toFixed(0)}–${Math.max(...xs).toFixed(0)}`,
        aboveFloor: Math.round(median(xs.map((x, i) => x - fl[i]!))),
      };
    }
    return {
      endpoints: n,
      rounds,
      callsPerRound: calls,
      rows,
      method:
        'kernel run_time_ns / run_cnt of the program (BPF_ENABLE_STATS) over each batch of calls; every kind once per round, rounds interleaved; median of the rounds, spread min–max; aboveFloor: median of per-round differences to the empty program on the same hook',
    };
  } finally {
    if (statsFd !== undefined) bpf.close(statsFd);
    for (const f of floorFds) {
      try {
        bpf.detachConnect4(f.fd, floorCg, f.hook);
      } catch {
        // already detached
      }
      bpf.close(f.fd);
    }
    dp?.close({ detach: true, cgroup: cg.dir });
    const { rmSync } = await import('node:fs');
    rmSync(floorPin, { recursive: true, force: true });
    cg.cleanup();
  }
}

export async function runKernelBench(quick: boolean): Promise<KernelFigures> {
  const env = kernelEnv();
  if (env.reason) return { skipped: env.reason };
  const bin = compileConnectBench();
  if (!bin) return { skipped: 'no C compiler for the connect() benchmark' };

  const n = quick ? 20_000 : 100_000;
  const mesh = new Mesh();
  mesh.put(bigService(n));
  const state = mesh.get('big')!;
  const bytes = encodeLocalityTree(state.spec, state.tree.compile());
  const tree = { tree: decodeLocalityTree(bytes), hash: contentHash(bytes) };
  const reversed = { tree: { ...tree.tree, service: 'big' }, hash: `${tree.hash}-2` };
  // The same tree less its first endpoint: what an admin PATCH health=unhealthy sends.
  const lessOne = new Mesh();
  lessOne.put({ ...state.spec, endpoints: state.spec.endpoints.slice(1) });
  const lessState = lessOne.get('big')!;
  const lessBytes = encodeLocalityTree(lessState.spec, lessState.tree.compile());
  const minusOne = { tree: decodeLocalityTree(lessBytes), hash: contentHash(lessBytes) };

  const cg = testCgroup('bench');
  const on = cg.child('on');
  const off = cg.child('off');
  const figures: Record<string, number | string> = { endpoints: n, treeBytesPerEndpoint: bytes.length / n };
  let dp: Datapath | undefined;
  let single: Datapath | undefined;
  try {
    dp = Datapath.open({ pinDir: cg.pinDir, cgroup: on, graceMs: 10 });
    dp.setWorkloads(
      { locality: { region: 'r1', zone: 'z1', subzone: 's0' }, network: '', node: '', cluster: '', labels: {} },
      [],
    );
    // Publish: the service is removed between rounds so each apply is a full fill + switch; batch vs single.
    const batchMs: number[] = [];
    const singleMs: number[] = [];
    const rounds = quick ? 3 : 5;
    for (let r = 0; r < rounds; r++) {
      dp.apply([]);
      await dp.settle();
      batchMs.push(dp.apply([r % 2 ? reversed : tree]).ms);
      await dp.settle();
    }
    // One endpoint change, back and forth.
    const changeMs: number[] = [];
    const changeWrites: number[] = [];
    const changeCpuMs: number[] = [];
    dp.apply([tree]);
    await dp.settle();
    for (let r = 0; r < (quick ? 6 : 11); r++) {
      const cpu = process.cpuUsage();
      const res = dp.apply([r % 2 ? tree : minusOne]);
      const used = process.cpuUsage(cpu);
      changeCpuMs.push((used.user + used.system) / 1000);
      changeMs.push(res.ms);
      changeWrites.push(res.mapWrites);
      await dp.settle();
    }
    figures['oneChangeMapWrites'] = median(changeWrites);
    figures['oneChangeMapWritesRange'] = `${Math.min(...changeWrites)}–${Math.max(...changeWrites)}`;
    figures['oneChangeApplyMs'] = median(changeMs);
    figures['oneChangeApplyMsRange'] = `${Math.min(...changeMs).toFixed(1)}–${Math.max(...changeMs).toFixed(1)}`;
    // CPU time of the agent process in apply: what the wall time is without other processes' share of the cores.
    figures['oneChangeApplyCpuMs'] = median(changeCpuMs);
    figures['oneChangeApplyCpuMsRange'] =
      `${Math.min(...changeCpuMs).toFixed(1)}–${Math.max(...changeCpuMs).toFixed(1)}`;
    dp.close();
    single = Datapath.open({ pinDir: cg.pinDir, cgroup: on, graceMs: 10, batchUpdates: false });
    single.setWorkloads(
      { locality: { region: 'r1', zone: 'z1', subzone: 's0' }, network: '', node: '', cluster: '', labels: {} },
      [],
    );
    for (let r = 0; r < rounds; r++) {
      single.apply([]);
      await single.settle();
      singleMs.push(single.apply([r % 2 ? tree : reversed]).ms);
      await single.settle();
    }
    figures['publishBatchMs'] = median(batchMs);
    figures['publishSingleMs'] = median(singleMs);
    figures['publishRatio'] = median(singleMs) / median(batchMs);

    // connect(): interleaved rounds of the three cases.
    const calls = quick ? 50_000 : 200_000;
    const without: number[] = [];
    const other: number[] = [];
    const vip: number[] = [];
    const vip6: number[] = [];
    // An IPv6 service of the same depth: 10k backends on ::1 (distinct ports), so the rewritten connect routes.
    const six = new Mesh();
    six.put({
      ...failoverService(
        'big6',
        makeEndpoints(10_000, 100).map((e, i) => ({ ...e, address: '::1', port: 20000 + i })),
      ),
      vip: VIP6,
      port: PORT,
    });
    const s6 = six.get('big6')!;
    const b6 = encodeLocalityTree(s6.spec, s6.tree.compile());
    const r6 = single.apply([
      (rounds - 1) % 2 ? tree : reversed,
      { tree: decodeLocalityTree(b6), hash: contentHash(b6) },
    ]);
    if (r6.rejected.length > 0) throw new Error(r6.rejected.map((r) => r.detail).join('; '));
    if (r6.unchanged !== 1) throw new Error('the IPv4 tree was to stay as it was');
    const before = single.stats(); // VIP connects of both families go through the same walk
    for (let r = 0; r < 5; r++) {
      without.push(connectNs(bin, off, '127.0.0.1', PORT, calls));
      other.push(connectNs(bin, on, '127.0.0.1', PORT, calls));
      vip.push(connectNs(bin, on, VIP, PORT, calls));
      vip6.push(connectNs(bin, on, VIP6, PORT, calls));
    }
    const after = single.stats();
    figures['nsConnectWithout'] = median(without);
    figures['nsConnectOtherAddress'] = median(other);
    figures['nsConnectVip'] = median(vip);
    figures['programNsPerVipConnect'] = median(vip) - median(without);
    figures['lookupsPerVipConnect'] = Number(after.lookups - before.lookups) / Number(after.connects - before.connects);
    figures['lookupBound'] =
      "service, workload entry, the tree levels looked up deepest first (1 when the caller's leaf has backends, depth at most), endpoint, stats; + 2 for a cgroup without an entry (the ancestor-level config, the node default: array reads); 1 for a non-VIP connect";
    figures['nsConnectVipV6'] = median(vip6);
    const spread = (xs: number[]) => `${Math.min(...xs).toFixed(0)}–${Math.max(...xs).toFixed(0)}`;
    figures['nsConnectRanges'] =
      `without ${spread(without)}, non-VIP ${spread(other)}, VIP ${spread(vip)}, VIP IPv6 ${spread(vip6)}`;
  } finally {
    single?.close({ detach: true, cgroup: on });
    if (!single) dp?.close({ detach: true, cgroup: on });
    cg.cleanup();
  }
  return figures as KernelFigures;
}

export interface AgentWorkFigures {
  readonly skipped?: string;
  readonly bigEndpoints?: number;
  readonly pairs?: number;
  /** Agent CPU ms per version (response decode + tree decode + plan + map writes), median and spread. */
  readonly withBigMs?: number;
  readonly withBigSpread?: string;
  readonly withoutBigMs?: number;
  readonly withoutBigSpread?: string;
  /** The same version handled as before this change: every tree decoded and hashed. */
  readonly decodeAllMs?: number;
  readonly decodeAllSpread?: string;
  /** Median of per-pair ratios withBig / withoutBig. */
  readonly ratio?: number;
  readonly method?: string;
}

/**
 * Agent work per version, as the agent does it for each SotW response: decode
 * the DiscoveryResponse, take its tree resources (TreeInbox: only new or
 * changed bytes are decoded), plan and write the maps. The version flips one
 * endpoint's health in a 4-endpoint service; one datapath also holds a
 * 100k-endpoint service (sent unchanged every version), the other does not;
 * a third handles the big one's versions decoding every tree (the agent
 * before TreeInbox). Interleaved, CPU time of this process (process.cpuUsage).
 */
export async function runAgentWorkBench(quick: boolean): Promise<AgentWorkFigures> {
  const env = kernelEnv();
  if (env.reason) return { skipped: env.reason };
  const n = quick ? 20_000 : 100_000;
  const pairs = quick ? 7 : 11;
  const Response = messageType('envoy.service.discovery.v3.DiscoveryResponse');
  const treeBytes = (spec: ServiceSpec): Uint8Array => {
    const mesh = new Mesh();
    mesh.put(spec);
    const st = mesh.get(spec.name)!;
    return encodeLocalityTree(st.spec, st.tree.compile());
  };
  const big = treeBytes({ ...bigService(n), name: 'big' });
  const small = (flip: boolean): Uint8Array => {
    const eps = makeEndpoints(4, 4).map((e, i) => ({
      ...e,
      address: `127.0.8.${i + 1}`,
      health: flip && i === 0 ? ('unhealthy' as const) : ('healthy' as const),
    }));
    return treeBytes({ ...failoverService('small', eps), vip: '127.100.8.1', port: 8080 });
  };
  const smallA = small(false);
  const smallB = small(true);
  const response = (version: number, trees: Uint8Array[]): Buffer =>
    Buffer.from(
      Response.encode(
        Response.fromObject({
          version_info: String(version),
          type_url: TREE_TYPE,
          nonce: String(version),
          resources: trees.map((value) => ({ type_url: TREE_TYPE, value })),
        }),
      ).finish(),
    );
  const cgs = ['with', 'without', 'all'].map((name) => testCgroup(`agentwork-${name}`));
  const dps: Datapath[] = [];
  try {
    for (const cg of cgs) {
      const dp = Datapath.open({ pinDir: cg.pinDir, cgroup: cg.dir, graceMs: 10 });
      dp.setWorkloads(NODE, []);
      dps.push(dp);
    }
    const inboxes = [new TreeInbox(), new TreeInbox()];
    // One version as the agent handles it: the response decoded as AgentAdsClient does, then the trees.
    const handle = (i: number, bytes: Buffer): number => {
      const cpu = process.cpuUsage();
      const res = Response.toObject(Response.decode(bytes), { defaults: true }) as {
        resources: { type_url: string; value: Uint8Array }[];
      };
      const resources = res.resources.map((r) => ({ typeUrl: r.type_url, value: r.value }));
      let trees;
      if (i < 2) {
        trees = inboxes[i]!.receive(resources).trees;
      } else {
        trees = resources.map((r) => {
          const d = tryDecodeLocalityTree(r.value);
          if (!d.ok) throw new Error(d.error);
          return { tree: d.tree, hash: contentHash(r.value) };
        });
      }
      const applied = dps[i]!.apply(trees);
      if (applied.rejected.length > 0) throw new Error(applied.rejected.map((x) => x.detail).join('; '));
      const used = process.cpuUsage(cpu);
      return (used.user + used.system) / 1000;
    };
    const rows: number[][] = [[], [], []];
    for (let v = 0; v <= pairs; v++) {
      const s = v % 2 ? smallB : smallA;
      const ms = [handle(0, response(v, [big, s])), handle(1, response(v, [s])), handle(2, response(v, [big, s]))];
      if (v > 0) ms.forEach((x, i) => rows[i]!.push(x)); // version 0 loads the trees: not a one-endpoint change
      for (const dp of dps) await dp.settle();
    }
    const spread = (xs: number[]) => `${Math.min(...xs).toFixed(2)}–${Math.max(...xs).toFixed(2)}`;
    return {
      bigEndpoints: n,
      pairs,
      withBigMs: median(rows[0]!),
      withBigSpread: spread(rows[0]!),
      withoutBigMs: median(rows[1]!),
      withoutBigSpread: spread(rows[1]!),
      decodeAllMs: median(rows[2]!),
      decodeAllSpread: spread(rows[2]!),
      ratio: median(rows[0]!.map((x, i) => x / rows[1]![i]!)),
      method:
        'CPU ms of the agent process per version (DiscoveryResponse decode, TreeInbox, plan, map writes into real maps), one endpoint of a 4-endpoint service flipped each version; with a 100k-endpoint service in every response vs without it vs with it and every tree decoded (before); interleaved, medians of the versions, spread min–max',
    };
  } finally {
    for (const dp of dps) dp.close({ detach: true, cgroup: cgs[dps.indexOf(dp)]!.dir });
    for (const cg of cgs) cg.cleanup();
  }
}

/** Map writes of one apply for each kind of one-endpoint change in an N-endpoint service. */
export interface ChangeWrites {
  readonly skipped?: string;
  readonly endpoints?: number;
  readonly rows?: Record<string, { mapWrites: number; path: 'in place' | 'full' }>;
  readonly goal?: string;
}

/**
 * For each kind of one-endpoint change the issue names, the map writes of the
 * apply that loads it into an N-endpoint service (3 levels, 1,000 leaves):
 * the base version is loaded, then the changed one. Deterministic counts (no
 * timing): each is one apply.
 */
export async function runChangeWritesBench(quick: boolean): Promise<ChangeWrites> {
  const env = kernelEnv();
  if (env.reason) return { skipped: env.reason };
  const n = quick ? 20_000 : 100_000;
  const enc = (spec: ServiceSpec) => {
    const mesh = new Mesh();
    mesh.put(spec);
    const st = mesh.get(spec.name)!;
    const bytes = encodeLocalityTree(st.spec, st.tree.compile());
    return { tree: decodeLocalityTree(bytes), hash: contentHash(bytes) };
  };
  const base = bigService(n);
  const eps = base.endpoints;
  const first = eps[0]!;
  const other = eps.find(
    (e) => e.locality.subzone !== first.locality.subzone || e.locality.zone !== first.locality.zone,
  )!;
  const with_ = (endpoints: typeof eps, extra: Partial<ServiceSpec> = {}): ServiceSpec => ({
    ...base,
    ...extra,
    endpoints,
  });
  const weighted = eps.map((e, i) => (i === 1 ? { ...e, weight: 2 } : e));
  const nf: ServiceSpec = {
    ...base,
    loadBalancing: {
      ...base.loadBalancing,
      routingPreference: ['network', 'region', 'zone', 'subzone'],
      crossNetworkFailover: true,
    },
    endpoints: eps.map((e, i) => ({ ...e, network: i % 2 ? 'n2' : 'n1' })),
  };
  const v6: ServiceSpec = {
    ...base,
    vip: 'fd00:c::901',
    endpoints: eps.map((e, i) => ({ ...e, address: `fd00:d::${(i >> 16).toString(16)}:${(i & 0xffff).toString(16)}` })),
  };
  // Each kind: the versions loaded in turn; the last apply's writes are the row.
  const kinds: [string, ...ServiceSpec[]][] = [
    ['health flip (an endpoint leaves its leaf)', base, with_(eps.slice(1))],
    ['re-add after a health flip (it comes back)', base, with_(eps.slice(1)), base],
    ['add an endpoint to a leaf with no free slot', base, with_([...eps, { ...first, address: '10.255.255.1' }])],
    ['move an endpoint between leaves', base, with_([{ ...first, locality: other.locality }, ...eps.slice(1)])],
    ['weight change', base, with_(weighted)],
    ['health flip while weighted', with_(weighted), with_(weighted.slice(0, 1).concat(weighted.slice(2)))],
    [
      'new locality',
      base,
      with_([...eps, { ...first, address: '10.255.255.2', locality: { region: 'r-new', zone: 'z', subzone: 's' } }]),
    ],
    ['network-first service: health flip', nf, { ...nf, endpoints: nf.endpoints.slice(1) }],
    ['IPv6 service: health flip', v6, { ...v6, endpoints: v6.endpoints.slice(1) }],
  ];
  const cg = testCgroup('changewrites');
  let dp: Datapath | undefined;
  const rows: Record<string, { mapWrites: number; path: 'in place' | 'full' }> = {};
  try {
    dp = Datapath.open({ pinDir: cg.pinDir, cgroup: cg.dir, graceMs: 5 });
    dp.setWorkloads(NODE, []);
    for (const [kind, ...versions] of kinds) {
      for (const [i, spec] of versions.entries()) {
        const t = enc(spec);
        const planned = dp.plan([t]);
        const r = dp.apply([t]);
        if (r.rejected.length > 0) throw new Error(`${kind}: ${r.rejected.map((x) => x.detail).join('; ')}`);
        await dp.settle();
        if (i === versions.length - 1)
          rows[kind] = { mapWrites: r.mapWrites, path: planned.patches.length > 0 ? 'in place' : 'full' };
      }
      dp.apply([]);
      await dp.settle();
    }
  } finally {
    dp?.close({ detach: true, cgroup: cg.dir });
    cg.cleanup();
  }
  return { endpoints: n, rows, goal: '<= 100 map writes for each' };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const quick = process.argv.includes('--quick');
  const only = process.argv.includes('--program');
  const agentOnly = process.argv.includes('--agent');
  const writesOnly = process.argv.includes('--writes');
  // --object FILE: the program rows for another build of the BPF object (to compare builds).
  const object = process.argv[process.argv.indexOf('--object') + 1];
  // --program: the program rows only; --agent: the agent-work rows only; --writes: the map writes per change kind only.
  const run = async () =>
    writesOnly
      ? { changeWrites: await runChangeWritesBench(quick) }
      : {
          ...(agentOnly
            ? {}
            : { program: await runProgramBench(quick, process.argv.includes('--object') ? object : undefined) }),
          ...(only ? {} : { agentWork: await runAgentWorkBench(quick) }),
          ...(only || agentOnly ? {} : { changeWrites: await runChangeWritesBench(quick) }),
          ...(only || agentOnly ? {} : await runKernelBench(quick)),
        };
  run().then(
    (f) => {
      console.log(JSON.stringify(f, null, 2));
      process.exit(0);
    },
    (err: unknown) => {
      console.error(err);
      process.exit(1);
    },
  );
}
