/**
 * Program cost per call from the kernel's own counters, against an empty
 * program on the same hook. Run with `npm run bench:kernel -- --program`.
 */
import { loadAddon, type Hook } from '../server/src/agent/bpf.js';
import { Datapath } from '../server/src/agent/datapath.js';
import { Mesh } from '../server/src/domain/mesh.js';
import type { ServiceSpec } from '../server/src/domain/service.js';
import { packagePath } from '../server/src/platform/paths.js';
import { contentHash } from '../server/src/resources/resource.js';
import { decodeLocalityTree, encodeLocalityTree } from '../server/src/resources/tree-codec.js';
import { kernelEnv, testCgroup } from '../e2e/support/kernel.js';
import { failoverService, makeEndpoints, median } from './data.js';
import { compileConnectBench, connectNs, NODE } from './kernel-fixtures.js';

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
