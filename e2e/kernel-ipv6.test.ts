/**
 * IPv6 in the kernel: cgroup/connect6 sends a connect to an IPv6 VIP to an
 * IPv6 backend of the caller's locality, over real connects. The backends
 * listen on fd00:c::/64 addresses the test adds to lo (loopback only; only
 * ::1 is loopback by default) and removes afterwards.
 */
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import { Datapath } from '../server/src/agent/datapath.js';
import { Mesh } from '../server/src/domain/mesh.js';
import type { ServiceSpec } from '../server/src/domain/service.js';
import { contentHash } from '../server/src/resources/resource.js';
import { decodeLocalityTree, encodeLocalityTree } from '../server/src/resources/tree-codec.js';
import dgram from 'node:dgram';
import { Connector, counts, idBackend, kernelEnv, peerClient, testCgroup } from './support/kernel.js';
import { placementOf, spec } from './support/kernel-fixtures.js';

const VIP = 'fd00:c::100';
const PORT = 8096;
const BACKENDS = [
  ['n1', 'fd00:c::11', 'r1/z1/s1'],
  ['n2', 'fd00:c::12', 'r1/z1/s1'],
  ['f1', 'fd00:c::21', 'r2/z1/s1'],
  ['v4', '127.0.5.31', 'r1/z1/s1'],
] as const;
const ADDED = BACKENDS.filter(([, ip]) => ip.includes(':')).map(([, ip]) => ip);

function ipv6Reason(): string | undefined {
  const k = kernelEnv().reason;
  if (k) return k;
  if (spawnSync('ip', ['-6', 'addr', 'show', 'dev', 'lo'], { stdio: 'ignore' }).status !== 0)
    return 'no `ip` command or no IPv6 on lo';
  return undefined;
}
const reason = ipv6Reason();
if (reason && process.env['CI'] === 'true' && !kernelEnv().reason) throw new Error(`CI=true: ${reason}`);

describe('IPv6 VIPs in the kernel (cgroup/connect6)', { skip: reason }, () => {
  let cg: ReturnType<typeof testCgroup>;
  let dp: Datapath;
  let dir: string;

  before(() => {
    for (const ip of ADDED) execFileSync('ip', ['-6', 'addr', 'replace', `${ip}/128`, 'dev', 'lo', 'nodad']);
    cg = testCgroup('ipv6');
    dir = cg.child('w');
    dp = Datapath.open({ pinDir: cg.pinDir, cgroup: cg.dir, graceMs: 20 });
    dp.setWorkloads(placementOf('r9/z9/s9'), [{ cgroup: dir, placement: placementOf('r1/z1/s1') }]);
  });

  after(() => {
    dp?.close({ detach: true, cgroup: cg.dir });
    cg?.cleanup();
    for (const ip of ADDED) spawnSync('ip', ['-6', 'addr', 'del', `${ip}/128`, 'dev', 'lo'], { stdio: 'ignore' });
  });

  const load = (s: ServiceSpec) => {
    const mesh = new Mesh();
    mesh.put(s);
    const st = mesh.get(s.name)!;
    const bytes = encodeLocalityTree(st.spec, st.tree.compile());
    return dp.apply([{ tree: decodeLocalityTree(bytes), hash: contentHash(bytes) }]);
  };

  it('sends IPv6 connects to the nearest IPv6 backends; strict refuses a caller with no match', async () => {
    const servers = await Promise.all(BACKENDS.map(([id, ip]) => idBackend(ip, PORT, id)));
    const conn = await Connector.start(dir);
    try {
      const r = load(spec('web6', VIP, PORT, 'failover', BACKENDS));
      assert.deepEqual(r.rejected, []);
      const near = await conn.connect(VIP, PORT, 60);
      assert.deepEqual(near.errors, {});
      assert.deepEqual(Object.keys(counts(near.ids)).sort(), ['n1', 'n2'], "the caller's subzone, IPv6 backends only");
      // The node default (r9) matches nothing: the whole service's IPv6 backends.
      dp.setWorkloads(placementOf('r9/z9/s9'), []);
      const all = await conn.connect(VIP, PORT, 90);
      assert.deepEqual(Object.keys(counts(all.ids)).sort(), ['f1', 'n1', 'n2']);
      load(spec('web6', VIP, PORT, 'strict', BACKENDS));
      const refused = await conn.connect(VIP, PORT, 5);
      assert.deepEqual(refused.ids, []);
      assert.equal(
        Object.values(refused.errors).reduce((a, b) => a + b, 0),
        5,
        `refused: ${JSON.stringify(refused.errors)}`,
      );
      // A connect to an IPv6 address that is no VIP is left alone.
      const direct = await conn.connect('fd00:c::21', PORT, 3);
      assert.deepEqual(counts(direct.ids), { f1: 3 });
      // The peer is the VIP (getpeername6), while a near backend answered.
      load(spec('web6', VIP, PORT, 'failover', BACKENDS));
      dp.setWorkloads(placementOf('r9/z9/s9'), [{ cgroup: dir, placement: placementOf('r1/z1/s1') }]);
      const seen = await peerClient(dir, VIP, PORT, 'tcp');
      assert.ok(seen.id === 'n1' || seen.id === 'n2', JSON.stringify(seen));
      assert.deepEqual(seen.peer, { address: VIP, port: PORT });
    } finally {
      conn.close();
      for (const s of servers) await s.close();
      dp.setWorkloads(placementOf('r9/z9/s9'), [{ cgroup: dir, placement: placementOf('r1/z1/s1') }]);
    }
  });

  it('UDP to an IPv6 VIP: sendto() reaches a near backend (sendmsg6), replies come from the VIP (recvmsg6)', async () => {
    load(spec('web6', VIP, PORT, 'failover', BACKENDS));
    const servers = ADDED.map((ip, i) => {
      const s = dgram.createSocket('udp6');
      s.on('message', (_m, r) => s.send(BACKENDS[i]![0], r.port, r.address));
      return { s, ready: new Promise<void>((resolve) => s.bind(PORT, ip, () => resolve())) };
    });
    await Promise.all(servers.map((x) => x.ready));
    try {
      const u = await peerClient(dir, VIP, PORT, 'sendto');
      assert.equal(u.replies?.length, 3, JSON.stringify(u));
      const ids = new Set(u.replies!.map((r) => r.id));
      assert.equal(ids.size, 1, 'one backend per socket and VIP');
      assert.ok(ids.has('n1') || ids.has('n2'));
      for (const r of u.replies!) assert.deepEqual(r.from, { address: VIP, port: PORT });
      const c = await peerClient(dir, VIP, PORT, 'udp');
      assert.deepEqual(c.from, { address: VIP, port: PORT }, JSON.stringify(c));
    } finally {
      for (const x of servers) x.s.close();
    }
  });

  it('a health flip of an IPv6 service is edited in: entries name address slots, connects follow', async () => {
    const servers = await Promise.all(BACKENDS.map(([id, ip]) => idBackend(ip, PORT, id)));
    const conn = await Connector.start(dir);
    const only = (ids: readonly string[]) => BACKENDS.filter(([id]) => ids.includes(id));
    try {
      dp.apply([]);
      await dp.settle();
      load(spec('web6', VIP, PORT, 'failover', BACKENDS));
      const tree = dp.services()[0]!.tree;
      const flip = load(spec('web6', VIP, PORT, 'failover', only(['n2', 'f1', 'v4'])));
      assert.deepEqual(flip.rejected, []);
      assert.equal(dp.services()[0]!.tree, tree, 'the same tree: edited, not laid out afresh');
      assert.ok(flip.mapWrites <= 8, `${flip.mapWrites} map writes`);
      const after = await conn.connect(VIP, PORT, 30);
      assert.deepEqual({ ...counts(after.ids), ...after.errors }, { n2: 30 });
      // n1 comes back: its address slot was kept, the entry names it again.
      const back = load(spec('web6', VIP, PORT, 'failover', BACKENDS));
      assert.ok(back.mapWrites <= 8, `${back.mapWrites} map writes`);
      assert.equal(dp.services()[0]!.tree, tree);
      const again = await conn.connect(VIP, PORT, 60);
      assert.deepEqual(again.errors, {});
      assert.deepEqual(Object.keys(counts(again.ids)).sort(), ['n1', 'n2']);
    } finally {
      conn.close();
      for (const s of servers) await s.close();
    }
  });
});
