/**
 * The load-aware pick in the kernel, exact under BPF_PROG_TEST_RUN: a client
 * node's spill (the leaves and weights its tree carries) splits the random
 * numbers by cumulative weight, one draw, then an endpoint in the chosen
 * leaf; a chosen leaf without backends is the plain pick; a service that is
 * no longer load aware is the plain pick again. A dual-stack service's two
 * trees (one per VIP) keep each its own spill entries.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { VERDICT } from '../server/src/agent/abi.js';
import { readTestCtx, testCtx } from '../server/src/agent/abi-test-run.js';
import { loadAddon } from '../server/src/agent/bpf.js';
import { Datapath } from '../server/src/agent/datapath.js';
import { SpillTable } from '../server/src/agent/spill-table.js';
import { Mesh } from '../server/src/domain/mesh.js';
import type { ServiceSpec } from '../server/src/domain/service.js';
import { contentHash } from '../server/src/resources/resource.js';
import {
  decodeLocalityTree,
  encodeLocalityTree,
  intToIpv4,
  ipv4ToInt,
  kernelVips,
} from '../server/src/resources/tree-codec.js';
import type { TreeSpill } from '../server/src/resources/tree-spill.js';
import { counts, kernelEnv, testCgroup } from './support/kernel.js';
import { placementOf, spec } from './support/kernel-fixtures.js';

const env = kernelEnv();
const VIP = '127.100.5.1';
const PORT = 8097;
const BACKENDS = [
  ['a1', '127.0.5.1', 'r1/za/s'],
  ['a2', '127.0.5.2', 'r1/za/s'],
  ['b1', '127.0.5.3', 'r1/zb/s'],
  ['c1', '127.0.5.4', 'r2/zc/s'],
] as const;
const ZONE = new Map<string, string>(BACKENDS.map(([id, ip]) => [ip, id[0]!]));

function loadAware(on = true): ServiceSpec {
  const s = spec('echo', VIP, PORT, 'failover', BACKENDS);
  return on
    ? {
        ...s,
        loadBalancing: {
          ...s.loadBalancing,
          loadAware: { balancing: 'waterfall', capacityRps: 10, utilizationTarget: 1, drainBelow: 0.25 },
        },
      }
    : s;
}

describe('the load-aware pick in the kernel (BPF_PROG_TEST_RUN)', { skip: env.reason }, () => {
  let cg: ReturnType<typeof testCgroup>;
  let dp: Datapath;
  let spill: SpillTable;

  /** Encodes the service with zone A's node spilling `weights` (leaf path → weight), as the server would. */
  const load = (s: ServiceSpec, weights: Record<string, number>, opts: { syncSpill?: boolean } = {}) => {
    const mesh = new Mesh();
    mesh.put(s);
    const st = mesh.get(s.name)!;
    const compiled = st.tree.compile();
    const pathOf = (i: number): string => {
      const out: string[] = [];
      for (let n = i; n > 0; n = compiled.nodes[n]!.parent) out.unshift(compiled.nodes[n]!.value);
      return out.join('/');
    };
    const index = new Map(compiled.nodes.map((_, i) => [pathOf(i), i]));
    const targets = Object.entries(weights).filter(([p]) => index.has(p));
    const spills: TreeSpill[] = targets.length
      ? [
          {
            node: index.get('r1/za/s')!,
            leaves: targets.map(([p]) => index.get(p)!),
            weights: targets.map(([, w]) => w),
          },
        ]
      : [];
    // A tree per VIP, as the server sends a dual-stack service.
    const trees = kernelVips(st.spec).map((vip) => {
      const bytes = encodeLocalityTree(st.spec, compiled, spills, vip);
      return { tree: decodeLocalityTree(bytes), hash: contentHash(bytes) };
    });
    const r = dp.apply(trees);
    assert.deepEqual(r.rejected, []);
    const before = spill.mapWrites;
    spill.sync(trees, new Set(opts.syncSpill === false ? ['echo'] : []));
    return { treeWrites: r.mapWrites, spillWrites: spill.mapWrites - before };
  };
  const pick = (rand: number) => {
    const out = readTestCtx(dp.testRun(testCtx({ vip: ipv4ToInt(VIP)!, port: PORT, cgroup: 0n, rand })));
    assert.equal(out.verdict, VERDICT.rewrite);
    return { zone: ZONE.get(intToIpv4(out.ip))!, ip: intToIpv4(out.ip), lookups: out.lookups };
  };
  const zones = (n: number, from = 0) => counts(Array.from({ length: n }, (_, r) => pick(from + r).zone));

  before(() => {
    cg = testCgroup('load-pick');
    dp = Datapath.open({ pinDir: cg.pinDir, cgroup: cg.dir, graceMs: 20 });
    dp.setWorkloads(placementOf('r1/za/s'), []);
    spill = SpillTable.open(loadAddon(), cg.pinDir)!;
    assert.ok(spill, 'the object has the load-aware maps');
  });

  after(() => {
    spill?.close();
    dp?.close({ detach: true, cgroup: cg.dir });
    cg?.cleanup();
  });

  it('without a plan, the node picks from its own leaf', () => {
    load(loadAware(), {});
    assert.deepEqual(zones(100), { a: 100 });
  });

  it('splits exactly by the cumulative weights over every draw, then an endpoint in the chosen leaf', () => {
    load(loadAware(), { 'r1/za/s': 600, 'r1/zb/s': 300, 'r2/zc/s': 100 });
    // The draw is rand % 1000 against 600 | 900 | 1000.
    assert.deepEqual(zones(1000), { a: 600, b: 300, c: 100 });
    // rand / 1000 picks in the leaf: both of zone A's endpoints.
    const inA = new Set([0, 1000, 2000, 3000].map((r) => pick(r).ip));
    assert.deepEqual([...inA].sort(), ['127.0.5.1', '127.0.5.2']);
    const plainLookups = (() => {
      load(loadAware(false), {});
      return pick(0).lookups;
    })();
    load(loadAware(), { 'r1/za/s': 600, 'r1/zb/s': 300, 'r2/zc/s': 100 });
    assert.equal(pick(700).lookups, plainLookups + 2, 'the spill costs two lookups: the entry and the chosen leaf');
  });

  it('a new plan is a new split: one map write, the entry rewritten in place', () => {
    // Only the plan changed: no tree write (the same layout, in place), one spill entry rewritten.
    assert.deepEqual(load(loadAware(), { 'r1/za/s': 250, 'r1/zb/s': 750 }), { treeWrites: 0, spillWrites: 1 });
    assert.deepEqual(zones(1000), { a: 250, b: 750 });
  });

  it('a chosen leaf without backends in the tree read is the plain pick', () => {
    load(loadAware(), { 'r1/za/s': 500, 'r1/zb/s': 500 });
    // Zone B's backend leaves the tree; the spill entry still names it (not yet rewritten).
    const gone = loadAware();
    load({ ...gone, endpoints: gone.endpoints.filter((e) => e.address !== '127.0.5.3') }, {}, { syncSpill: false });
    assert.deepEqual(zones(1000), { a: 1000 });
  });

  it("a dual-stack service's two trees keep each its spill entries", () => {
    const s = loadAware();
    const v6 = s.endpoints.map((e, i) => ({ ...e, address: `fd00:e::${i + 1}` }));
    const dual = { ...s, vips: [VIP, 'fd00:e::100'], endpoints: [...s.endpoints, ...v6] };
    // The IPv6 tree is synced after the IPv4 one: it must not take the IPv4 VIP's entries away.
    load(dual, { 'r1/za/s': 600, 'r1/zb/s': 300, 'r2/zc/s': 100 });
    assert.deepEqual(zones(1000), { a: 600, b: 300, c: 100 });
    load(loadAware(), { 'r1/za/s': 600, 'r1/zb/s': 300, 'r2/zc/s': 100 });
    assert.deepEqual(zones(1000), { a: 600, b: 300, c: 100 }, 'single-stack again: the IPv4 entries stay');
  });

  it('a service no longer load aware drops its entries and picks plainly', () => {
    load(loadAware(), { 'r1/za/s': 100, 'r1/zb/s': 900 });
    assert.equal(zones(1000)['b'], 900);
    load(loadAware(false), { 'r1/za/s': 100, 'r1/zb/s': 900 });
    assert.deepEqual(zones(1000), { a: 1000 });
  });
});
