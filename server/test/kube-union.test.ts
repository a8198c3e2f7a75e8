/**
 * The union of several clusters' services (kube/kube-union.ts) over a real
 * in-memory store: one service whose endpoints are every cluster's; a change
 * in one cluster patches only its endpoints; a cluster not synced yet keeps
 * what the store holds of it (a restart, a second replica); a removed
 * cluster's endpoints go and a service only it had is deleted.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ServiceSpec } from '../src/domain/service.js';
import { ClusterUnion } from '../src/kube/kube-union.js';
import { KubeWriter } from '../src/kube/kube-writer.js';
import { LocalStore } from '../src/store/level/local-store.js';
import type { Store } from '../src/store/store.js';
import { ep, service } from './support/builders.js';

const web = (cluster: string, addresses: readonly string[]): ServiceSpec =>
  service(
    'web.default',
    addresses.map((address) => ep({ address, cluster, locality: 'r1/z1' })),
  );

async function held(store: Store, name = 'web.default'): Promise<string[]> {
  const s = await store.get(name);
  return (s?.spec.endpoints ?? []).map((e) => `${e.address}@${e.cluster}`).sort();
}

function union(store: Store, clusters: readonly string[]) {
  const writer = new KubeWriter(store, () => {});
  const u = new ClusterUnion(store, writer);
  u.setOrder(clusters);
  return { u, writer };
}

describe('several clusters as one mesh', () => {
  it('one service, the union; a change in one cluster patches only it', async () => {
    const store = await LocalStore.open();
    const { u, writer } = union(store, ['east', 'west']);
    const east = u.sinkFor('east');
    const west = u.sinkFor('west');
    await east.write(web('east', ['10.0.1.1']));
    await west.write(web('west', ['10.0.2.1', '10.0.2.2']));
    await east.prune(new Set(['web.default']));
    await west.prune(new Set(['web.default']));
    assert.deepEqual(await held(store), ['10.0.1.1@east', '10.0.2.1@west', '10.0.2.2@west']);
    const before = { ...writer.counts };
    await west.write(web('west', ['10.0.2.1']));
    assert.deepEqual(await held(store), ['10.0.1.1@east', '10.0.2.1@west']);
    assert.equal(writer.counts.patch - before.patch, 1);
    assert.equal(writer.counts.put, before.put);
    await store.close();
  });

  it('a cluster not synced yet keeps what the store holds of it; once listed, what it lacks goes', async () => {
    const store = await LocalStore.open();
    const first = union(store, ['east', 'west']);
    await first.u.sinkFor('east').write(web('east', ['10.0.1.1']));
    await first.u.sinkFor('west').write(web('west', ['10.0.2.1']));
    // A restart (or a second replica): west's API server does not answer, east lists and changes.
    const { u } = union(store, ['east', 'west']);
    await u.sinkFor('east').write(web('east', ['10.0.1.1', '10.0.1.2']));
    await u.sinkFor('east').prune(new Set(['web.default']));
    assert.deepEqual(await held(store), ['10.0.1.1@east', '10.0.1.2@east', '10.0.2.1@west']);
    // West answers at last, and no longer has the Service.
    await u.sinkFor('west').prune(new Set());
    assert.deepEqual(await held(store), ['10.0.1.1@east', '10.0.1.2@east']);
    await store.close();
  });

  it("a removed cluster's endpoints go; a service only it had is deleted; the others stay", async () => {
    const store = await LocalStore.open();
    const { u } = union(store, ['east', 'west']);
    await u.sinkFor('east').write(web('east', ['10.0.1.1']));
    await u.sinkFor('west').write(web('west', ['10.0.2.1']));
    await u.sinkFor('west').write({ ...web('west', ['10.0.2.9']), name: 'db.default' });
    u.setOrder(['east']);
    await u.removeCluster('west');
    assert.deepEqual(await held(store), ['10.0.1.1@east']);
    assert.equal(await store.get('db.default'), undefined);
    await store.close();
  });
});
