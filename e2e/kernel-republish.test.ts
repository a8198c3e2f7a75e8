/**
 * O(change) republish over real connects: a health flip is edited into the
 * buckets on the endpoint's path (a slot and a count per level, no new tree
 * id, no switch), and connects see it at once.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Datapath } from '../server/src/agent/datapath.js';
import { Mesh } from '../server/src/domain/mesh.js';
import type { ServiceSpec } from '../server/src/domain/service.js';
import { contentHash } from '../server/src/resources/resource.js';
import { decodeLocalityTree, encodeLocalityTree } from '../server/src/resources/tree-codec.js';
import { Connector, counts, idBackend, kernelEnv, testCgroup } from './support/kernel.js';
import { placementOf, spec } from './support/kernel-fixtures.js';

const env = kernelEnv();
const VIP = '127.100.5.1';
const PORT = 8097;
const NEAR = Array.from({ length: 8 }, (_, i) => [`n${i + 1}`, `127.0.5.${i + 1}`, 'r1/z1/s1'] as const);
const FAR = [['f1', '127.0.5.21', 'r2/z1/s1'] as const];

function service(health: (id: string) => 'healthy' | 'unhealthy'): ServiceSpec {
  const all = [...NEAR, ...FAR];
  const s = spec('flip', VIP, PORT, 'failover', all);
  return { ...s, endpoints: s.endpoints.map((e, i) => ({ ...e, health: health(all[i]![0]) })) };
}

describe('O(change) republish in the kernel', { skip: env.reason }, () => {
  let cg: ReturnType<typeof testCgroup>;
  let dp: Datapath;
  let dir: string;

  const load = (s: ServiceSpec) => {
    const mesh = new Mesh();
    mesh.put(s);
    const st = mesh.get(s.name)!;
    const bytes = encodeLocalityTree(st.spec, st.tree.compile());
    return dp.apply([{ tree: decodeLocalityTree(bytes), hash: contentHash(bytes) }]);
  };

  before(() => {
    cg = testCgroup('republish');
    dir = cg.child('w');
    dp = Datapath.open({ pinDir: cg.pinDir, cgroup: cg.dir, graceMs: 20 });
    dp.setWorkloads(placementOf('r9/z9/s9'), [{ cgroup: dir, placement: placementOf('r1/z1/s1') }]);
  });

  after(() => {
    dp?.close({ detach: true, cgroup: cg.dir });
    cg?.cleanup();
  });

  it('a health flip is a slot and a count per level, in the same tree, and connects follow it', async () => {
    const servers = await Promise.all([...NEAR, ...FAR].map(([id, ip]) => idBackend(ip, PORT, id)));
    const conn = await Connector.start(dir);
    try {
      const first = load(service(() => 'healthy'));
      assert.deepEqual(first.rejected, []);
      const tree = dp.services()[0]!.tree;
      const seen = async () => {
        const r = await conn.connect(VIP, PORT, 240);
        assert.deepEqual(r.errors, {});
        return counts(r.ids);
      };
      assert.deepEqual(Object.keys(await seen()).sort(), NEAR.map(([id]) => id).sort());

      // n3 goes unhealthy: in each of the 4 buckets on its path (root, r1, r1/z1, r1/z1/s1) its entry
      // takes the last one, then the count drops.
      const flip = load(service((id) => (id === 'n3' ? 'unhealthy' : 'healthy')));
      assert.deepEqual(flip.rejected, []);
      assert.equal(flip.mapWrites, 8, 'a slot and a count per level');
      assert.equal(dp.services()[0]!.tree, tree, 'no new tree id: no switch, nothing retired');
      const without = await seen();
      assert.equal(without['n3'], undefined, 'n3 is never picked once it is unhealthy');
      assert.deepEqual(
        Object.keys(without).sort(),
        NEAR.map(([id]) => id)
          .filter((id) => id !== 'n3')
          .sort(),
      );

      // n3 comes back: appended to each bucket, then the counts.
      const back = load(service(() => 'healthy'));
      assert.equal(back.mapWrites, 8);
      assert.equal(dp.services()[0]!.tree, tree);
      assert.ok((await seen())['n3']! > 0, 'n3 is picked again');

      // Two of eight unhealthy: edited in the same way, still the same tree.
      const two = load(service((id) => (id === 'n1' || id === 'n2' ? 'unhealthy' : 'healthy')));
      assert.ok(two.mapWrites <= 16, `${two.mapWrites} writes`);
      assert.equal(dp.services()[0]!.tree, tree);
      const rest = await seen();
      assert.deepEqual(Object.keys(rest).sort(), ['n3', 'n4', 'n5', 'n6', 'n7', 'n8']);
    } finally {
      conn.close();
      for (const s of servers) await s.close();
    }
  });

  it('connects running through edited flips never fail and never reach a backend after it left', async () => {
    const servers = await Promise.all([...NEAR, ...FAR].map(([id, ip]) => idBackend(ip, PORT, id)));
    const conn = await Connector.start(dir);
    try {
      load(service(() => 'healthy'));
      const tree = dp.services()[0]!.tree;
      await conn.loop(VIP, PORT);
      // n5 leaves and comes back 20 times; each version is a few writes. Record when n5 was out.
      const out: [number, number][] = [];
      for (let i = 0; i < 20; i++) {
        const flip = load(service((id) => (id === 'n5' ? 'unhealthy' : 'healthy')));
        assert.ok(flip.mapWrites <= 8);
        const since = Date.now();
        await new Promise((r) => setTimeout(r, 15));
        out.push([since, Date.now()]);
        assert.ok(load(service(() => 'healthy')).mapWrites <= 8);
        await new Promise((r) => setTimeout(r, 15));
      }
      const samples = await conn.stop();
      assert.equal(dp.services()[0]!.tree, tree, 'every version was edited in');
      assert.ok(samples.length >= 20, `only ${samples.length} connects`);
      const failed = samples.filter(([, id]) => id.startsWith('!'));
      assert.deepEqual(failed, [], 'no connect failed');
      // A connect that started (the sample's time) 2 ms after the write returned and 2 ms before n5 came back never reached n5.
      const late = samples.filter(([t, id]) => id === 'n5' && out.some(([a, b]) => t > a + 2 && t < b - 2));
      assert.ok(
        samples.some(([t]) => out.some(([a, b]) => t > a + 2 && t < b - 2)),
        'some connects ran while n5 was out',
      );
      assert.deepEqual(late, [], 'n5 reached while it was out');
      assert.ok(
        samples.every(([, id]) => id.startsWith('n')),
        "only the caller's subzone",
      );
      console.log(`# ${samples.length} connects through 40 edited versions, none failed`);
    } finally {
      conn.close();
      for (const s of servers) await s.close();
    }
  });
});
