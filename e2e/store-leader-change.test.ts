/**
 * An etcd leader change under admin writes (issue 33): a `canopy serve` on a
 * real three-member etcd cluster, 20 PATCHes sent 100 ms apart, and the
 * leader killed (kill -9) after the fifth. Before, the writes that met the
 * election failed (2 of 20); now the store retries them within its deadline,
 * so every one is acknowledged and every change is held.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startCanopyProcess, type CanopyProcess } from './support/canopy-process.js';
import { leaderOf, startEtcdCluster, type EtcdCluster } from './support/etcd-cluster.js';
import { etcdSkip } from './support/etcd-process.js';

const WRITES = 20;
const config = {
  services: [
    {
      name: 'lc',
      endpoints: Array.from({ length: WRITES }, (_, i) => ({ address: `10.8.0.${i + 1}`, port: 80 })),
    },
  ],
};

describe('etcd leader change', { skip: etcdSkip() }, () => {
  let cluster: EtcdCluster;
  let canopy: CanopyProcess;
  before(async () => {
    cluster = await startEtcdCluster(3);
    const all = cluster.members.map((m) => m.endpoint).join(',');
    canopy = await startCanopyProcess(config, ['--store', `etcd://${all}/canopy-leader/`]);
  });
  after(async () => {
    await canopy?.kill();
    await cluster?.destroy();
  });

  it('20 writes, the leader killed after the fifth: every write is acknowledged and held', async (t) => {
    const leader = await leaderOf(cluster);
    assert.ok(leader, 'a leader before the writes');
    const writes: Promise<{ status: number; body: unknown; ms: number }>[] = [];
    for (let i = 0; i < WRITES; i++) {
      if (i === 5) await leader.kill();
      const started = Date.now();
      writes.push(
        canopy
          .admin('PATCH', `/api/v1/services/lc/endpoints/10.8.0.${i + 1}%3A80`, { weight: 10 + i })
          .then((r) => ({ ...r, ms: Date.now() - started })),
      );
      await new Promise((r) => setTimeout(r, 100));
    }
    const results = await Promise.all(writes);
    const slowest = Math.max(...results.map((r) => r.ms));
    t.diagnostic(`leader ${leader.name} killed; slowest write ${slowest} ms (loaded machine)`);
    const failed = results.flatMap((r, i) =>
      r.status === 200 ? [] : [`#${i}: ${r.status} ${JSON.stringify(r.body)}`],
    );
    assert.deepEqual(failed, []);
    const held = await canopy.admin('GET', '/api/v1/services/lc');
    const weights = (held.body as { endpoints: { address: string; weight: number }[] }).endpoints;
    for (let i = 0; i < WRITES; i++)
      assert.equal(weights.find((e) => e.address === `10.8.0.${i + 1}`)?.weight, 10 + i, `write #${i} is held`);
    const next = await leaderOf(cluster);
    assert.ok(next && next !== leader, 'another member leads');
  });
});
