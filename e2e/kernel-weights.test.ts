/**
 * Endpoint weights in the kernel: within the chosen node's range the program
 * picks by weight (a bounded binary search over cumulative weights), as xDS
 * clients do. Exact under BPF_PROG_TEST_RUN, then a 9:1 split over real
 * connects from a cgroup.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { VERDICT } from '../server/src/agent/abi.js';
import { readTestCtx, testCtx } from '../server/src/agent/abi-test-run.js';
import { cgroupId, Datapath } from '../server/src/agent/datapath.js';
import { Mesh } from '../server/src/domain/mesh.js';
import type { ServiceSpec } from '../server/src/domain/service.js';
import { contentHash } from '../server/src/resources/resource.js';
import { decodeLocalityTree, encodeLocalityTree, intToIpv4, ipv4ToInt } from '../server/src/resources/tree-codec.js';
import { Connector, counts, idBackend, kernelEnv, testCgroup } from './support/kernel.js';
import { placementOf, spec } from './support/kernel-fixtures.js';

const env = kernelEnv();
const VIP = '127.100.4.1';
const PORT = 8099;

function weighted(weights: readonly number[]): ServiceSpec {
  const base = spec(
    'weighted',
    VIP,
    PORT,
    'failover',
    weights.map((_, i) => [`w${i + 1}`, `127.0.4.${i + 1}`, i < 2 ? 'r1/z1/s1' : 'r2/z1/s1'] as const),
  );
  return { ...base, endpoints: base.endpoints.map((e, i) => ({ ...e, weight: weights[i]! })) };
}

describe('weighted picks in the kernel', { skip: env.reason }, () => {
  let cg: ReturnType<typeof testCgroup>;
  let dp: Datapath;
  let dir: string;

  const load = (s: ServiceSpec) => {
    const mesh = new Mesh();
    mesh.put(s);
    const st = mesh.get(s.name)!;
    const bytes = encodeLocalityTree(st.spec, st.tree.compile());
    const r = dp.apply([{ tree: decodeLocalityTree(bytes), hash: contentHash(bytes) }]);
    assert.deepEqual(r.rejected, []);
  };

  before(() => {
    cg = testCgroup('weights');
    dir = cg.child('w');
    dp = Datapath.open({ pinDir: cg.pinDir, cgroup: cg.dir, graceMs: 20 });
    dp.setWorkloads(placementOf('r9/z9/s9'), [{ cgroup: dir, placement: placementOf('r1/z1/s1') }]);
  });

  after(() => {
    dp?.close({ detach: true, cgroup: cg.dir });
    cg?.cleanup();
  });

  it('splits exactly by weight over every random number (BPF_PROG_TEST_RUN)', () => {
    load(weighted([9, 1, 3, 5]));
    const pick = (cgroup: bigint, rand: number) => {
      const out = readTestCtx(dp.testRun(testCtx({ vip: ipv4ToInt(VIP)!, port: PORT, cgroup, rand })));
      assert.equal(out.verdict, VERDICT.rewrite);
      return intToIpv4(out.ip);
    };
    const near = cgroupId(dir);
    // r1/z1/s1 holds w1 (9) and w2 (1): ten random numbers, nine to w1.
    assert.deepEqual(counts(Array.from({ length: 10 }, (_, r) => pick(near, r))), { '127.0.4.1': 9, '127.0.4.2': 1 });
    // The node (r9) matches nothing: the whole service, 9 + 1 + 3 + 5 = 18.
    assert.deepEqual(counts(Array.from({ length: 18 }, (_, r) => pick(0n, r))), {
      '127.0.4.1': 9,
      '127.0.4.2': 1,
      '127.0.4.3': 3,
      '127.0.4.4': 5,
    });
    // A range that does not start the layout: r2/z1/s1 holds w3 (3) and w4 (5).
    dp.setWorkloads(placementOf('r2/z1/s1'), [{ cgroup: dir, placement: placementOf('r1/z1/s1') }]);
    assert.deepEqual(counts(Array.from({ length: 8 }, (_, r) => pick(0n, r + 8))), { '127.0.4.3': 3, '127.0.4.4': 5 });
    dp.setWorkloads(placementOf('r9/z9/s9'), [{ cgroup: dir, placement: placementOf('r1/z1/s1') }]);
  });

  it('a 9:1 split over real connects', async () => {
    load(weighted([9, 1, 3, 5]));
    const servers = await Promise.all([1, 2, 3, 4].map((i) => idBackend(`127.0.4.${i}`, PORT, `w${i}`)));
    const conn = await Connector.start(dir);
    try {
      const n = 400;
      const r = await conn.connect(VIP, PORT, n);
      assert.deepEqual(r.errors, {});
      const c = counts(r.ids);
      assert.deepEqual(Object.keys(c).sort(), ['w1', 'w2'], "only the caller's subzone");
      // 9:1 → 360 expected; binomial sd = 6: [330, 390] is five sd wide on each side.
      assert.ok(c['w1']! >= 330 && c['w1']! <= 390, `w1 got ${c['w1']} of ${n}`);
      console.log(`# weighted split over ${n} real connects: w1 ${c['w1']}, w2 ${c['w2']}`);
    } finally {
      conn.close();
      for (const s of servers) await s.close();
    }
  });
});
