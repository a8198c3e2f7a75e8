/**
 * The kernel datapath with the real BPF program: trees compiled by the
 * server's domain code, encoded as the server sends them, decoded and
 * loaded by the agent's Datapath, then
 * - the selection run in the kernel with BPF_PROG_TEST_RUN (exact choices,
 *   lookup counts), and
 * - real connect() calls on 127.0.0.0/8 from processes inside cgroups.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { VERDICT } from '../server/src/agent/abi.js';
import { readTestCtx, testCtx } from '../server/src/agent/abi-test-run.js';
import { Datapath } from '../server/src/agent/datapath.js';
import type { IncomingTree } from '../server/src/agent/planner.js';
import { Mesh } from '../server/src/domain/mesh.js';
import type { LbMode, ServiceSpec } from '../server/src/domain/service.js';
import { contentHash } from '../server/src/resources/resource.js';
import { decodeLocalityTree, encodeLocalityTree, intToIpv4, ipv4ToInt } from '../server/src/resources/tree-codec.js';
import { Connector, counts, idBackend, kernelEnv, testCgroup } from './support/kernel.js';
import { placementOf, spec } from './support/kernel-fixtures.js';

const env = kernelEnv();
const skip = env.reason;

const VIP = '127.100.0.1';
const PORT = 8080;

/** Encodes and decodes a spec's tree exactly as the server and agent do. */
function treesOf(mesh: Mesh, ...specs: ServiceSpec[]): IncomingTree[] {
  return specs.map((s) => {
    mesh.put(s);
    const state = mesh.get(s.name)!;
    const bytes = encodeLocalityTree(state.spec, state.tree.compile());
    return { tree: decodeLocalityTree(bytes), hash: contentHash(bytes) };
  });
}

const BACKENDS: [string, string, string][] = [
  // id, ip, locality
  ['b1', '127.0.0.31', 'r1/z1/s1'],
  ['b2', '127.0.0.32', 'r1/z1/s1'],
  ['b3', '127.0.0.33', 'r1/z1/s2'],
  ['b4', '127.0.0.34', 'r1/z2/s1'],
  ['b5', '127.0.0.35', 'r2/z1/s1'],
];

function idOf(ip: number): string {
  return BACKENDS.find(([, addr]) => addr === intToIpv4(ip))?.[0] ?? intToIpv4(ip);
}

describe('kernel datapath', { skip }, () => {
  let cg: ReturnType<typeof testCgroup>;
  let dp: Datapath;
  let mesh: Mesh;
  const backends: Awaited<ReturnType<typeof idBackend>>[] = [];
  let near: string; // r1/z1/s1
  let far: string; // r2/z1/s1
  let bare: string; // no workload entry: the node default (r1/z2/s1)

  const apply = (mode: LbMode, which = BACKENDS) => dp.apply(treesOf(mesh, spec('web', VIP, PORT, mode, which)));
  const run = (cgroup: bigint, rand: number, vip = VIP, port = PORT) =>
    readTestCtx(dp.testRun(testCtx({ vip: ipv4ToInt(vip)!, port, cgroup, rand })));

  before(async () => {
    cg = testCgroup('dp');
    near = cg.child('near');
    far = cg.child('far');
    bare = cg.child('bare');
    dp = Datapath.open({ pinDir: cg.pinDir, cgroup: cg.dir, graceMs: 100 });
    dp.setWorkloads(placementOf('r1/z2/s1'), [
      { cgroup: near, placement: placementOf('r1/z1/s1') },
      { cgroup: far, placement: placementOf('r2/z1/s1') },
    ]);
    mesh = new Mesh();
    for (const [id, ip] of BACKENDS) backends.push(await idBackend(ip, PORT, id));
    apply('failover');
  });

  after(async () => {
    dp?.close({ detach: true, cgroup: cg.dir });
    for (const b of backends) await b.close();
    cg?.cleanup();
  });

  describe('selection under BPF_PROG_TEST_RUN', () => {
    it('picks start + rand % count within the deepest matched node, in 4 lookups (the deepest level first)', async () => {
      apply('failover');
      const { cgroupId } = await import('../server/src/agent/datapath.js');
      const id = cgroupId(near);
      const seen = new Set<string>();
      for (let rand = 0; rand < 6; rand++) {
        const r = run(id, rand);
        assert.equal(r.verdict, VERDICT.rewrite);
        assert.equal(r.matched, 3);
        assert.equal(r.port, PORT);
        // r1/z1/s1 holds b1, b2 in that order: rand picks b1, b2, b1, ...
        assert.equal(idOf(r.ip), rand % 2 === 0 ? 'b1' : 'b2');
        assert.equal(r.lookups, 4, 'service + workload + the leaf level (it has backends) + endpoint');
        seen.add(idOf(r.ip));
      }
      assert.deepEqual([...seen].sort(), ['b1', 'b2']);
    });

    it('falls back to the node default locality for a cgroup without an entry', () => {
      const r = run(999_999n, 0);
      assert.equal(r.verdict, VERDICT.rewrite);
      assert.equal(idOf(r.ip), 'b4', 'the node is r1/z2/s1, which only b4 serves');
      assert.equal(r.lookups, 1 + 2 + 1 + 1, 'the cgroup miss costs one more lookup');
    });

    it('stops at the deepest level that matches', async () => {
      const { cgroupId } = await import('../server/src/agent/datapath.js');
      apply(
        'failover',
        BACKENDS.filter(([id]) => id !== 'b5'),
      );
      // far is r2/z1/s1 and r2 has no backend now: no level matches, any backend of the service.
      const ids = new Set(Array.from({ length: 4 }, (_, rand) => idOf(run(cgroupId(far), rand).ip)));
      assert.deepEqual([...ids].sort(), ['b1', 'b2', 'b3', 'b4']);
      assert.equal(run(cgroupId(far), 0).matched, 0);
      assert.equal(
        run(cgroupId(far), 0).lookups,
        1 + 1 + 3 + 1,
        'no level matches: every level was looked up, deepest first',
      );
      apply('failover');
      assert.equal(idOf(run(cgroupId(far), 7).ip), 'b5');
    });

    it('strict mode refuses without a full match; random mode ignores locality', async () => {
      const { cgroupId } = await import('../server/src/agent/datapath.js');
      apply(
        'strict',
        BACKENDS.filter(([id]) => id !== 'b5'),
      );
      assert.equal(run(cgroupId(far), 0).verdict, VERDICT.refuse);
      assert.equal(idOf(run(cgroupId(near), 1).ip), 'b2');
      apply('random');
      const r = run(cgroupId(near), 4);
      assert.equal(r.matched, 0);
      assert.equal(idOf(r.ip), 'b5', 'random picks from all five, in tree order: rand 4 is the fifth');
      assert.equal(r.lookups, 2, 'service + endpoint: random mode reads no locality');
    });

    it('leaves anything that is not a service VIP alone, in one lookup', () => {
      apply('failover');
      const r = run(0n, 0, '127.0.0.31', PORT);
      assert.equal(r.verdict, VERDICT.pass);
      assert.equal(r.lookups, 1);
      assert.equal(run(0n, 0, VIP, PORT + 1).verdict, VERDICT.pass, 'another port of the VIP is not the service');
    });
  });

  describe('real connects from cgroups', () => {
    let a: Connector;
    let b: Connector;
    let c: Connector;

    before(async () => {
      a = await Connector.start(near);
      b = await Connector.start(far);
      c = await Connector.start(bare);
    });

    after(() => {
      a?.close();
      b?.close();
      c?.close();
    });

    it('sends each cgroup to its own nearest backends', async () => {
      apply('failover');
      const ra = await a.connect(VIP, PORT, 40);
      const rb = await b.connect(VIP, PORT, 20);
      const rc = await c.connect(VIP, PORT, 20);
      assert.deepEqual(Object.keys(counts(ra.ids)).sort(), ['b1', 'b2'], JSON.stringify(ra));
      assert.deepEqual(counts(rb.ids), { b5: 20 }, JSON.stringify(rb));
      assert.deepEqual(counts(rc.ids), { b4: 20 }, 'no workload entry: the node locality r1/z2/s1');
      assert.deepEqual(ra.errors, {});
    });

    it('fails over to the next tier when the nearest backends go, and back', async () => {
      apply(
        'failover',
        BACKENDS.filter(([id]) => id !== 'b1' && id !== 'b2'),
      );
      assert.deepEqual(counts((await a.connect(VIP, PORT, 20)).ids), { b3: 20 }, 'r1/z1/s1 is empty: r1/z1 is next');
      apply(
        'failover',
        BACKENDS.filter(([id]) => !['b1', 'b2', 'b3'].includes(id)),
      );
      assert.deepEqual(counts((await a.connect(VIP, PORT, 20)).ids), { b4: 20 }, 'then r1');
      apply('failover');
      assert.deepEqual(Object.keys(counts((await a.connect(VIP, PORT, 20)).ids)).sort(), ['b1', 'b2']);
    });

    it('strict mode refuses the connect (EPERM) rather than leave the locality', async () => {
      apply(
        'strict',
        BACKENDS.filter(([id]) => id !== 'b5'),
      );
      const rb = await b.connect(VIP, PORT, 5);
      assert.deepEqual(rb, { ids: [], errors: { EPERM: 5 } });
      assert.deepEqual(Object.keys(counts((await a.connect(VIP, PORT, 40)).ids)).sort(), ['b1', 'b2']);
      apply('failover');
    });

    it('does not touch connects to other addresses', async () => {
      const r = await a.connect('127.0.0.35', PORT, 3);
      assert.deepEqual(r.ids, ['b5', 'b5', 'b5']);
    });

    it('churn: 1,000 tree versions under a connect loop, no failed connect, no stale backend', async () => {
      // Versions alternate between two backend sets for the near cgroup: {b1,b2} and {b3} (b1, b2 removed).
      const grace = 100;
      const removedAt = new Map<string, number>(); // backend id -> when it last left the set a connects can reach
      await a.loop(VIP, PORT);
      const t0 = Date.now();
      for (let v = 0; v < 1000; v++) {
        const withNear = v % 2 === 0;
        apply('failover', withNear ? BACKENDS : BACKENDS.filter(([id]) => id !== 'b1' && id !== 'b2'));
        const now = Date.now();
        if (withNear) {
          removedAt.delete('b1');
          removedAt.delete('b2');
        } else {
          removedAt.set('b1', now);
          removedAt.set('b2', now);
        }
        if (v % 10 === 0) await new Promise((r) => setTimeout(r, 2));
      }
      const publishMs = Date.now() - t0;
      await new Promise((r) => setTimeout(r, 50));
      const samples = await a.stop();
      await dp.settle();
      const failed = samples.filter(([, id]) => id.startsWith('!'));
      assert.deepEqual(failed.slice(0, 5), [], `${failed.length} of ${samples.length} connects failed`);
      assert.ok(samples.length > 20, `the loop made ${samples.length} connects during the churn`);
      // The last version holds b3 only (v = 999 is odd): nothing may reach b1/b2 one grace period after it.
      const end = Math.max(...[...removedAt.values()]);
      const late = samples.filter(([t, id]) => (id === 'b1' || id === 'b2') && t > end + grace);
      assert.deepEqual(late, [], 'a connect reached a backend removed more than one grace period earlier');
      const ids = new Set(samples.map(([, id]) => id));
      assert.ok(
        [...ids].every((id) => ['b1', 'b2', 'b3'].includes(id)),
        `only near-tier backends: ${[...ids].join(',')}`,
      );
      console.log(`# churn: 1000 versions in ${publishMs} ms, ${samples.length} connects, 0 failed`);
      apply('failover');
    });
  });

  describe('restart', () => {
    it('a new Datapath on the same pins resumes without disturbing the datapath', async () => {
      apply('failover');
      const before = dp.services();
      dp.close();
      const a = await Connector.start(near);
      try {
        // No agent at all: the pinned maps and the attached program keep serving.
        assert.deepEqual(Object.keys(counts((await a.connect(VIP, PORT, 40)).ids)).sort(), ['b1', 'b2']);
        dp = Datapath.open({ pinDir: cg.pinDir, cgroup: cg.dir, graceMs: 100 });
        assert.equal(dp.resumed, true);
        assert.deepEqual(
          dp.services().map((s) => [s.key, s.tree, s.ranges.reduce((n, r) => n + r.length, 0)]),
          before.map((s) => [s.key, s.tree, s.ranges.reduce((n, r) => n + r.length, 0)]),
          'the bookkeeping is rebuilt from the maps',
        );
        dp.setWorkloads(placementOf('r1/z2/s1'), [
          { cgroup: near, placement: placementOf('r1/z1/s1') },
          { cgroup: far, placement: placementOf('r2/z1/s1') },
        ]);
        await a.loop(VIP, PORT);
        apply('failover');
        apply(
          'failover',
          BACKENDS.filter(([id]) => id !== 'b1'),
        );
        await new Promise((r) => setTimeout(r, 300));
        const samples = await a.stop();
        assert.deepEqual(
          samples.filter(([, id]) => id.startsWith('!')),
          [],
        );
        assert.equal(samples.at(-1)?.[1], 'b2');
      } finally {
        a.close();
      }
    });
  });
});
