/**
 * etcd quorum lost (issue 19, section 5): two `canopy serve` replicas on a
 * real three-member etcd cluster; two members are stopped, so the third is
 * up (its watch streams stay connected) but cannot commit. Readiness follows
 * a linearizable read, so both replicas report not ready; a write is retried
 * for the store's write budget (5 s: an election takes 1–2 s) and then fails
 * with a 503 saying why; with quorum back, readiness and writes return.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startCanopyProcess, type CanopyProcess } from './support/canopy-process.js';
import { startEtcdCluster, type EtcdCluster } from './support/etcd-cluster.js';
import { etcdSkip } from './support/etcd-process.js';

const config = {
  services: [
    {
      name: 'q',
      endpoints: [
        { address: '10.7.0.1', port: 80 },
        { address: '10.7.0.2', port: 80 },
      ],
    },
  ],
};

describe('etcd quorum lost', { skip: etcdSkip() }, () => {
  let cluster: EtcdCluster;
  const replicas: CanopyProcess[] = [];
  before(async () => {
    cluster = await startEtcdCluster(3);
    // Each replica talks to the member that will stay up, as a replica in that member's zone would.
    const survivor = cluster.members[0]!.endpoint;
    for (let i = 0; i < 2; i++)
      replicas.push(await startCanopyProcess(config, ['--store', `etcd://${survivor}/canopy-quorum/`]));
  });
  after(async () => {
    for (const r of replicas) await r.kill();
    await cluster?.destroy();
  });

  it('replicas report not ready, writes fail with 503 once the budget passes, and both come back with quorum', async (t) => {
    for (const r of replicas) assert.equal((await r.admin('GET', '/readyz')).status, 200);
    await cluster.members[1]!.stop();
    await cluster.members[2]!.stop();

    for (const r of replicas) await until(async () => (await r.admin('GET', '/readyz')).status === 503, 15_000);
    const started = Date.now();
    const write = await replicas[0]!.admin('PATCH', '/api/v1/services/q/endpoints/10.7.0.1%3A80', { weight: 5 });
    const elapsed = Date.now() - started;
    t.diagnostic(`write without quorum answered ${write.status} after ${elapsed} ms`);
    assert.equal(write.status, 503, JSON.stringify(write.body));
    const error = (write.body as { error: { code: string; message: string } }).error;
    assert.equal(error.code, 'CANOPY_NOT_READY');
    assert.match(error.message, /did not commit the write within 5000 ms \(\d+ attempts; no leader or no quorum\?\)/);
    // Retried until the 5 s budget passed (an election would have ended by then), not longer. Loose for a loaded machine.
    assert.ok(elapsed >= 4500 && elapsed < 9000, `failed after ${elapsed} ms`);
    // Still serving reads of the last state.
    assert.equal((await replicas[1]!.admin('GET', '/api/v1/services/q')).status, 200);

    await Promise.all([cluster.members[1]!.start(), cluster.members[2]!.start()]);
    for (const r of replicas) await until(async () => (await r.admin('GET', '/readyz')).status === 200, 30_000);
    const back = await replicas[1]!.admin('PATCH', '/api/v1/services/q/endpoints/10.7.0.2%3A80', { weight: 7 });
    assert.equal(back.status, 200);
  });
});

async function until(cond: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 100));
  }
}
