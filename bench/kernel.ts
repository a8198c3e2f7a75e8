/**
 * Kernel datapath figures, each against a baseline in the same run:
 * - publish time of one tree of N endpoints: batch updates vs one syscall per entry;
 * - map writes and apply time for one endpoint change (a health flip) in that tree,
 *   edited into the buckets on its path (layout-edit.ts) — the full fill + switch above is its baseline;
 * - ns per connect() with the program attached (to a VIP: the tree walk; to
 *   any other address: one lookup) vs a cgroup without it;
 * - map lookups per VIP connect, counted by the program itself;
 * - bytes per endpoint of the compiled tree on the wire.
 * Needs root, cgroup v2, bpffs and `npm run build:bpf`; otherwise it says why
 * and reports nothing. Run alone: node dist/bench/kernel.js [--quick]
 */
import { fileURLToPath } from 'node:url';
import { Datapath } from '../server/src/agent/datapath.js';
import { Mesh } from '../server/src/domain/mesh.js';
import { contentHash } from '../server/src/resources/resource.js';
import { decodeLocalityTree, encodeLocalityTree } from '../server/src/resources/tree-codec.js';
import { kernelEnv, testCgroup } from '../e2e/support/kernel.js';
import { failoverService, makeEndpoints, median } from './data.js';
import { runAgentWorkBench, runChangeWritesBench } from './kernel-agent.js';
import { runProgramBench } from './kernel-program.js';
import { bigService, compileConnectBench, connectNs, PORT, VIP, VIP6 } from './kernel-fixtures.js';

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

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const quick = process.argv.includes('--quick');
  const only = process.argv.includes('--program');
  const agentOnly = process.argv.includes('--agent');
  const writesOnly = process.argv.includes('--writes');
  // --object FILE: the program rows for another build of the BPF object (to compare builds);
  // --against FILE: both builds in the same rounds, interleaved, and their picks compared.
  const arg = (flag: string) =>
    process.argv.includes(flag) ? process.argv[process.argv.indexOf(flag) + 1] : undefined;
  // --program: the program rows only; --agent: the agent-work rows only; --writes: the map writes per change kind only.
  const run = async () =>
    writesOnly
      ? { changeWrites: await runChangeWritesBench(quick) }
      : {
          ...(agentOnly ? {} : { program: await runProgramBench(quick, arg('--object'), arg('--against')) }),
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
