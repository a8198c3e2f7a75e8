/**
 * The etcd backend against a real etcd (Debian's etcd-server) started by the
 * test: the Store contract, two stores on one etcd seeing each other's
 * writes, and conditional writes that never lose one another.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { EtcdStore } from '../server/src/store/etcd/etcd-store.js';
import { MeshFeed } from '../server/src/store/mesh-feed.js';
import { StoreConflict, type Store } from '../server/src/store/store.js';
import { addressesOf, eventually, service, storeContract } from '../server/test/support/store-contract.js';
import { etcdSkip, startEtcd, type EtcdProcess } from './support/etcd-process.js';
import { startTcpProxy } from './support/tcp-proxy.js';
import { Etcd3 } from 'etcd3';

const skip = etcdSkip();
let etcd: EtcdProcess | undefined;
let prefixes = 0;
const opened: Store[] = [];

describe('etcd store', { skip }, () => {
  before(async () => {
    etcd = await startEtcd();
  });
  after(async () => {
    for (const s of opened) await s.close();
    await etcd?.destroy();
  });

  /** Each test its own key prefix on the one etcd. */
  const open = async (prefix = `/canopy-test-${++prefixes}/`): Promise<Store> => {
    const s = await EtcdStore.open({ endpoints: [etcd!.endpoint], prefix });
    opened.push(s);
    return s;
  };

  storeContract('etcd', () => open());

  it('two replicas on one etcd see each other’s writes through their watches', async () => {
    const prefix = `/canopy-shared-${++prefixes}/`;
    const [a, b] = [await open(prefix), await open(prefix)];
    const feedB = await MeshFeed.open(b);
    await a.put(service('x', ['10.0.0.1', '10.0.0.2']), { owner: 'api' });
    await eventually(() => feedB.mesh.get('x')?.endpoints.size === 2);
    const ep = (await a.get('x'))!.spec.endpoints.find((e) => e.address === '10.0.0.1')!;
    await a.patchEndpoints('x', [{ ...ep, health: 'unhealthy' }], []);
    await eventually(() => feedB.mesh.get('x')?.endpoints.get('10.0.0.1:80')?.health === 'unhealthy');
    await b.delete('x');
    await eventually(async () => (await a.get('x')) === undefined);
    feedB.close();
  });

  it('a replica cut off while etcd compacts the history it would resume from reads the state again', async () => {
    const prefix = `/canopy-gap-${++prefixes}/`;
    const [host, port] = etcd!.endpoint.split(':');
    const proxy = await startTcpProxy({ host: host!, port: Number(port) });
    try {
      const a = await open(prefix);
      const b = await EtcdStore.open({ endpoints: [proxy.address], prefix });
      opened.push(b);
      const feedB = await MeshFeed.open(b);
      await a.put(service('kept', ['10.0.0.1']), { owner: 'api' });
      await a.put(service('gone', ['10.0.0.2']), { owner: 'api' });
      await eventually(() => feedB.mesh.get('gone') !== undefined);
      proxy.cut();
      await a.put(service('kept', ['10.0.0.1', '10.0.0.3']), { owner: 'api' });
      await a.delete('gone');
      const last = await a.put(service('new', ['10.0.0.4']), { owner: 'api' });
      // The history B would resume from is gone.
      const admin = new Etcd3({ hosts: `http://${etcd!.endpoint}` });
      await admin.kv.compact({ revision: String(last), physical: true });
      admin.close();
      proxy.heal();
      await eventually(() => feedB.mesh.get('new') !== undefined && feedB.mesh.get('gone') === undefined, 20_000);
      assert.deepEqual(addressesOf(feedB.mesh.get('kept')?.spec), ['10.0.0.1', '10.0.0.3']);
      // Healthy again once the new watch is in place.
      await eventually(() => feedB.connected);
      feedB.close();
    } finally {
      await proxy.close();
    }
  });

  it('concurrent writes from two replicas to one service: none is lost, a stale conditional write conflicts', async () => {
    const prefix = `/canopy-race-${++prefixes}/`;
    const [a, b] = [await open(prefix), await open(prefix)];
    const r0 = await a.put(service('x', ['10.0.0.1']), { owner: 'api' });
    await eventually(async () => (await b.get('x'))?.revision === r0);
    const base = (await a.get('x'))!.spec.endpoints[0]!;
    // Each replica patches its own endpoints of the same service, interleaved.
    const writes: Promise<unknown>[] = [];
    for (let i = 0; i < 20; i++) {
      const store = i % 2 === 0 ? a : b;
      writes.push(store.patchEndpoints('x', [{ ...base, address: `10.0.1.${i + 1}` }], []));
    }
    await Promise.all(writes);
    await eventually(
      async () => (await a.get('x'))?.spec.endpoints.length === 21 && (await b.get('x'))?.spec.endpoints.length === 21,
    );
    await assert.rejects(b.put(service('x', ['10.9.9.9']), { owner: 'api', ifRevision: r0 }), StoreConflict);
    assert.equal(addressesOf((await a.get('x'))?.spec)?.length, 21);
  });
});
