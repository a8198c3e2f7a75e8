/**
 * What load awareness adds to a connect in the kernel: the same 3-level
 * service plain, load aware without a spill entry for the caller (the flag,
 * the counter), and load aware with the caller's node spilling 50/50 to a
 * neighbour (the entry, the chosen leaf, the counter). Program time per call
 * from the kernel's own counters (BPF_ENABLE_STATS), every kind once per
 * round, rounds interleaved; median of the rounds and spread.
 *
 *   sudo node dist/bench/kernel-load.js [--rounds N] [--calls N]
 */
import { loadAddon } from '../server/src/agent/bpf.js';
import { Datapath } from '../server/src/agent/datapath.js';
import { SpillTable } from '../server/src/agent/spill-table.js';
import { Mesh } from '../server/src/domain/mesh.js';
import type { ServiceSpec } from '../server/src/domain/service.js';
import { contentHash } from '../server/src/resources/resource.js';
import { decodeLocalityTree, encodeLocalityTree } from '../server/src/resources/tree-codec.js';
import type { TreeSpill } from '../server/src/resources/tree-spill.js';
import { kernelEnv, testCgroup } from '../e2e/support/kernel.js';
import { failoverService, makeEndpoints, median } from './data.js';
import { compileConnectBench, connectNs, NODE } from './kernel-fixtures.js';

const PORT = 9192;
const N = 2_000;

function loopback(name: string, vip: string, loadAware: boolean): ServiceSpec {
  const eps = makeEndpoints(N, 20).map((e, i) => ({ ...e, address: `127.${(i >> 8) + 1}.${i & 255}.9`, port: PORT }));
  const spec = { ...failoverService(name, eps), vip, port: PORT };
  const lb = { ...spec.loadBalancing, crossNetworkFailover: false };
  return {
    ...spec,
    loadBalancing: loadAware
      ? { ...lb, loadAware: { balancing: 'waterfall', capacityRps: 10, utilizationTarget: 1, drainBelow: 0.25 } }
      : lb,
  };
}

function arg(name: string, dflt: number): number {
  const i = process.argv.indexOf(name);
  return i >= 0 ? Number(process.argv[i + 1]) : dflt;
}

async function main(): Promise<void> {
  const env = kernelEnv();
  if (env.reason) return console.log(`skipped: ${env.reason}`);
  const bin = compileConnectBench();
  if (!bin) return console.log('skipped: no C compiler for the connect() benchmark');
  const rounds = arg('--rounds', 7);
  const calls = arg('--calls', 50_000);
  const kinds = [
    { row: 'plain failover', vip: '127.100.9.21', spec: loopback('plain', '127.100.9.21', false), spill: false },
    { row: 'load aware, no entry', vip: '127.100.9.22', spec: loopback('aware', '127.100.9.22', true), spill: false },
    { row: 'load aware, 50/50 spill', vip: '127.100.9.23', spec: loopback('spill', '127.100.9.23', true), spill: true },
  ];
  const mesh = new Mesh();
  const trees = kinds.map((k) => {
    mesh.put(k.spec);
    const st = mesh.get(k.spec.name)!;
    const compiled = st.tree.compile();
    const spills: TreeSpill[] = [];
    if (k.spill) {
      // The node's own leaf and the first other leaf of its zone's region, 500 each.
      const node = st.tree.matchPlacement(NODE);
      const ids = [...st.tree.nodesOf()].map((n) => n.id);
      const other = st.tree.root.leaves(st.tree.levels).find((l) => l.id !== node.id)!;
      const leaves = [ids.indexOf(node.id), ids.indexOf(other.id)].sort((a, b) => a - b);
      spills.push({ node: ids.indexOf(node.id), leaves, weights: [500, 500] });
    }
    const bytes = encodeLocalityTree(st.spec, compiled, spills);
    return { tree: decodeLocalityTree(bytes), hash: contentHash(bytes) };
  });
  const bpf = loadAddon();
  const cg = testCgroup('loadbench');
  const pod = cg.child('pod');
  let dp: Datapath | undefined;
  let spill: SpillTable | undefined;
  let statsFd: number | undefined;
  try {
    dp = Datapath.open({ pinDir: cg.pinDir, cgroup: cg.dir, graceMs: 10 });
    dp.setWorkloads(NODE, [{ cgroup: pod, placement: NODE }]);
    const r = dp.apply(trees);
    if (r.rejected.length > 0) throw new Error(r.rejected.map((x) => x.detail).join('; '));
    spill = SpillTable.open(bpf, cg.pinDir)!;
    spill.sync(trees, new Set());
    statsFd = bpf.enableStats();
    const prog = dp.programFd(4)!;
    const per = new Map(kinds.map((k) => [k.row, [] as number[]]));
    for (let round = 0; round < rounds; round++) {
      for (const k of kinds) {
        const a = bpf.progStats(prog);
        connectNs(bin, pod, k.vip, PORT, calls);
        const b = bpf.progStats(prog);
        per.get(k.row)!.push((b.runTimeNs - a.runTimeNs) / Math.max(1, b.runCnt - a.runCnt));
      }
    }
    const base = per.get(kinds[0]!.row)!;
    console.log(`${N} endpoints, ${rounds} rounds of ${calls} UDP connect() calls per kind, interleaved`);
    console.log('| connect | ns (spread) | vs plain, median of per-round ratios |');
    console.log('|---|---|---|');
    for (const k of kinds) {
      const xs = per.get(k.row)!;
      const ratio = median(xs.map((x, i) => x / base[i]!));
      const fmt = (v: number) => Number(v.toPrecision(2));
      console.log(
        `| ${k.row} | ${fmt(median(xs))} (${fmt(Math.min(...xs))}–${fmt(Math.max(...xs))}) | ${ratio.toFixed(2)} |`,
      );
    }
  } finally {
    if (statsFd !== undefined) bpf.close(statsFd);
    spill?.close();
    dp?.close({ detach: true, cgroup: cg.dir });
    cg.cleanup();
  }
}

await main();
