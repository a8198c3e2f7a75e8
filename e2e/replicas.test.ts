/**
 * Three `canopy serve` replicas on one etcd (Debian's etcd-server, started
 * here), real grpc-js-xds clients whose bootstrap lists every replica, and
 * real backends: kill -9 the replica the clients are on, write through
 * another during the failover, restart etcd under load.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startBackend, type Backend } from '../server/src/demo/backend.js';
import { xdsBootstrap } from '../server/src/demo/bootstrap.js';
import { XdsEchoClient, type Tally } from '../server/src/demo/xds-client.js';
import { parseLocality } from '../server/src/domain/locality.js';
import { startCanopyProcess, type CanopyProcess } from './support/canopy-process.js';
import { etcdSkip, startEtcd, type EtcdProcess } from './support/etcd-process.js';
import { RawAdsStream } from './support/raw-ads.js';

const EDS = 'type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment';
const BACKENDS: [id: string, host: string, locality: string][] = [
  ['b1', '127.0.11.1', 'r1/z1/s1'],
  ['b2', '127.0.11.2', 'r1/z2/s1'],
  ['b3', '127.0.11.3', 'r2/z1/s1'],
];
const only = (id: string) => (t: Tally) => t.failures === 0 && t.byBackend.size === 1 && t.byBackend.has(id);

describe('three replicas on one etcd', { skip: etcdSkip() }, () => {
  let etcd: EtcdProcess;
  const backends: Backend[] = [];
  const replicas: CanopyProcess[] = [];
  const clients = new Map<string, XdsEchoClient>();

  const config = () => ({
    server: { debounceMs: 20 },
    services: [
      {
        name: 'echo',
        loadBalancing: { mode: 'failover', routingPreference: ['region', 'zone', 'subzone'] },
        endpoints: backends.map((b, i) => ({
          address: b.address,
          port: b.port,
          locality: parseLocality(BACKENDS[i]![2]),
        })),
      },
    ],
  });
  const endpointPath = (i: number) =>
    `/api/v1/services/echo/endpoints/${encodeURIComponent(`${backends[i]!.address}:${backends[i]!.port}`)}`;

  before(async () => {
    etcd = await startEtcd();
    for (const [id, host, locality] of BACKENDS)
      backends.push(await startBackend({ id, host, locality: parseLocality(locality) }));
    for (let i = 0; i < 3; i++) {
      replicas.push(await startCanopyProcess(config(), ['--store', `etcd://${etcd.endpoint}/canopy-replicas/`]));
    }
    // One target naming every replica: pick_first connects to the first that answers.
    const target = `ipv4:${replicas.map((r) => r.xdsUri).join(',')}`;
    for (const locality of ['r1/z1/s1', 'r1/z2/s1']) {
      clients.set(
        locality,
        new XdsEchoClient({
          target: 'xds:///echo',
          bootstrap: xdsBootstrap({
            serverUri: target,
            nodeId: `client-${locality}`,
            locality: parseLocality(locality),
          }),
        }),
      );
    }
  });
  after(async () => {
    for (const c of clients.values()) c.close();
    for (const r of replicas) await r.kill();
    await Promise.all(backends.map((b) => b.stop()));
    await etcd?.destroy();
  });

  const nodesOn = async (r: CanopyProcess) =>
    ((await r.admin('GET', '/debug/clients')).body as { clients: { nodeId: string }[] }).clients.map((c) => c.nodeId);

  it('clients route to their nearest backend through the first replica', async () => {
    await clients.get('r1/z1/s1')!.waitUntil(only('b1'));
    await clients.get('r1/z2/s1')!.waitUntil(only('b2'));
    const onA = await nodesOn(replicas[0]!);
    assert.deepEqual(onA.filter((n) => n.startsWith('client-')).sort(), ['client-r1/z1/s1', 'client-r1/z2/s1']);
  });

  it('kill -9 of that replica: clients move to another, and a write made during the failover reaches them', async () => {
    await replicas[0]!.kill();
    // Written through B while the clients have no server.
    const r = await replicas[1]!.admin('PATCH', endpointPath(0), { health: 'unhealthy' });
    assert.equal(r.status, 200);
    await clients.get('r1/z1/s1')!.waitUntil(only('b2'), { timeoutMs: 30_000 });
    await clients.get('r1/z2/s1')!.waitUntil(only('b2'));
    // Both reconnect (the one that needed no update may do so a little later, on its backoff).
    await until(async () => {
      const moved = [...(await nodesOn(replicas[1]!)), ...(await nodesOn(replicas[2]!))];
      return moved.includes('client-r1/z1/s1') && moved.includes('client-r1/z2/s1');
    }, 30_000);
  });

  it('a client resuming on another replica with the version it holds is sent nothing again', async (t) => {
    const first = new RawAdsStream(replicas[1]!.xdsUri);
    const second = new RawAdsStream(replicas[2]!.xdsUri);
    try {
      const node = { id: 'resumer', locality: { region: 'r1', zone: 'z1', sub_zone: 's1' } };
      first.send({ type_url: EDS, node, resource_names: ['echo'] });
      const held = await first.next(5000);
      // As a reconnecting SotW client does: its last version, no nonce.
      second.send({ type_url: EDS, node, resource_names: ['echo'], version_info: held.version_info });
      const resent = await second.maybeNext(1500);
      t.diagnostic(`re-pushed on reconnect to another replica: ${resent ? 1 : 0} (version ${held.version_info})`);
      assert.equal(resent?.version_info ?? held.version_info, held.version_info, 'replicas agree on the version');
    } finally {
      first.close();
      second.close();
    }
  });

  it('etcd restart: replicas report not ready, keep serving the last state, and resume', async () => {
    await etcd.stop();
    for (const r of replicas.slice(1)) {
      await until(async () => (await r.admin('GET', '/readyz')).status === 503, 20_000);
    }
    // Still serving: b1 is unhealthy, so the r1/z1 client stays on b2.
    await clients.get('r1/z1/s1')!.waitUntil(only('b2'));
    // A write cannot be stored: refused as unavailable, not lost silently and not a 500.
    const refused = await replicas[1]!.admin('PATCH', endpointPath(1), { weight: 3 });
    assert.equal(refused.status, 503);
    assert.equal((refused.body as { error: { code: string } }).error.code, 'CANOPY_NOT_READY');
    await etcd.restart();
    for (const r of replicas.slice(1)) {
      await until(async () => (await r.admin('GET', '/readyz')).status === 200, 30_000);
    }
    const back = await replicas[2]!.admin('PATCH', endpointPath(0), { health: 'healthy' });
    assert.equal(back.status, 200);
    await clients.get('r1/z1/s1')!.waitUntil(only('b1'), { timeoutMs: 20_000 });
  });
});

async function until(cond: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    try {
      if (await cond()) return;
    } catch {
      // A refused request counts as "not yet".
    }
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 100));
  }
}
