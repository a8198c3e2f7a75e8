/** The Store contract, run against each backend (memory, LevelDB, etcd). */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Endpoint, ServiceSpec } from '../../src/domain/service.js';
import { parseServiceSpec } from '../../src/domain/spec.js';
import { StoreConflict, type Store, type StoreEvent } from '../../src/store/store.js';

export function service(name: string, addresses: string[], extra: object = {}): ServiceSpec {
  const r = parseServiceSpec({
    name,
    endpoints: addresses.map((address) => ({ address, port: 80, locality: { region: 'r1', zone: 'z1' } })),
    ...extra,
  });
  assert.ok(r.ok, JSON.stringify(!r.ok && r.errors));
  return r.value;
}

export const addressesOf = (spec: ServiceSpec | undefined) => spec?.endpoints.map((e) => e.address).sort();

/** Waits until `cond` holds: a watch-fed backend (etcd) applies its own writes asynchronously. */
export async function eventually(cond: () => boolean | Promise<boolean>, timeoutMs = 5000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 10));
  }
}

export function storeContract(name: string, open: () => Promise<Store>): void {
  describe(`Store contract: ${name}`, () => {
    it('keeps small state by key: the last value put; no revision, no watch event', async () => {
      const store = await open();
      const events: StoreEvent[] = [];
      const before = (await store.list()).revision;
      const stop = store.watch(before, { onEvents: (e) => events.push(...e) });
      assert.equal(await store.getState('load-plan'), undefined);
      await store.putState('load-plan', '{"format":1}');
      await store.putState('load-plan', '{"format":2}');
      await store.putState('other', 'x');
      assert.equal(await store.getState('load-plan'), '{"format":2}');
      assert.equal(await store.getState('other'), 'x');
      await store.put(service('after-state', ['10.0.0.9']), { owner: 'api' });
      await eventually(() => events.length > 0);
      stop();
      assert.deepEqual(
        events.map((e) => e.kind === 'put' && e.service.spec.name),
        ['after-state'],
        'state writes are not store events',
      );
      assert.equal((await store.list()).services.filter((s) => s.spec.name === 'after-state').length, 1);
      await store.close();
    });

    it('puts, gets, lists, patches and deletes with increasing revisions', async () => {
      const store = await open();
      const r1 = await store.put(service('a', ['10.0.0.1', '10.0.0.2']), { owner: 'api' });
      const r2 = await store.put(service('b', ['10.0.0.3']), { owner: 'file', fileDigest: 'd1' });
      assert.ok(r2 > r1);
      const a = await store.get('a');
      assert.equal(a?.owner, 'api');
      assert.equal(a?.revision, r1);
      assert.deepEqual(addressesOf(a?.spec), ['10.0.0.1', '10.0.0.2']);
      assert.equal((await store.get('b'))?.fileDigest, 'd1');

      const ep = a!.spec.endpoints.find((e) => e.address === '10.0.0.1') as Endpoint;
      const r3 = await store.patchEndpoints('a', [{ ...ep, health: 'unhealthy' }], ['10.0.0.2:80']);
      assert.ok(r3 !== undefined && r3 > r2);
      const patched = await store.get('a');
      assert.deepEqual(
        patched?.spec.endpoints.map((e) => [e.address, e.health]),
        [['10.0.0.1', 'unhealthy']],
      );
      assert.equal(patched?.owner, 'api', 'a patch keeps the owner');

      assert.equal(await store.patchEndpoints('nope', [ep], []), undefined);
      assert.equal(await store.delete('nope'), undefined);
      const r4 = await store.delete('b');
      const snapshot = await store.list();
      assert.equal(snapshot.revision, r4);
      assert.deepEqual(
        snapshot.services.map((s) => s.spec.name),
        ['a'],
      );
      await store.close();
    });

    it('refuses a write whose expected revision is stale, and changes nothing', async () => {
      const store = await open();
      const r1 = await store.put(service('a', ['10.0.0.1']), { owner: 'api', ifRevision: 0 });
      await assert.rejects(store.put(service('a', ['10.0.0.9']), { owner: 'api', ifRevision: 0 }), StoreConflict);
      await store.put(service('a', ['10.0.0.2']), { owner: 'api', ifRevision: r1 });
      await assert.rejects(store.delete('a', { ifRevision: r1 }), StoreConflict);
      assert.deepEqual(addressesOf((await store.get('a'))?.spec), ['10.0.0.2']);
      await store.close();
    });

    it('puts many: one revision each, in order, seen by watchers and gets', async () => {
      const store = await open();
      const r0 = await store.put(service('a', ['10.0.0.1']), { owner: 'api' });
      const seen: StoreEvent[] = [];
      const stop = store.watch(r0, { onEvents: (events) => seen.push(...events) });
      const revisions = await store.putMany([
        { spec: service('a', ['10.0.0.2']), opts: { owner: 'file', fileDigest: 'da', ifRevision: r0 } },
        { spec: service('b', ['10.0.0.3', '10.0.0.4']), opts: { owner: 'file', fileDigest: 'db', ifRevision: 0 } },
      ]);
      assert.equal(revisions.length, 2);
      assert.ok(revisions[0]! > r0 && revisions[1]! > revisions[0]!);
      assert.deepEqual(addressesOf((await store.get('a'))?.spec), ['10.0.0.2']);
      assert.equal((await store.get('b'))?.fileDigest, 'db');
      assert.equal((await store.get('b'))?.revision, revisions[1]);
      await eventually(() => seen.length === 2);
      stop();
      assert.deepEqual(
        seen.map((e) => [e.kind, e.kind === 'put' ? e.service.spec.name : e.name, e.revision]),
        [
          ['put', 'a', revisions[0]],
          ['put', 'b', revisions[1]],
        ],
      );
      assert.deepEqual(await store.putMany([]), []);
      await store.close();
    });

    it('puts all or nothing: one stale revision writes none of them', async () => {
      const store = await open();
      const r0 = await store.put(service('a', ['10.0.0.1']), { owner: 'api' });
      const stale = await store
        .putAll([
          { spec: service('new', ['10.0.0.5']), opts: { owner: 'api', ifRevision: 0 } },
          { spec: service('a', ['10.0.0.6']), opts: { owner: 'api', ifRevision: r0 - 1 } },
        ])
        .then(
          () => undefined,
          (err: unknown) => err,
        );
      assert.ok(stale instanceof StoreConflict, String(stale));
      assert.equal(await store.get('new'), undefined, 'the first was not written either');
      assert.deepEqual(addressesOf((await store.get('a'))?.spec), ['10.0.0.1']);
      const r1 = await store.putAll([
        { spec: service('new', ['10.0.0.5']), opts: { owner: 'api', ifRevision: 0 } },
        { spec: service('a', ['10.0.0.6']), opts: { owner: 'api', ifRevision: r0 } },
      ]);
      assert.ok(r1 > r0);
      await eventually(async () => (await store.get('new')) !== undefined);
      assert.deepEqual(addressesOf((await store.get('a'))?.spec), ['10.0.0.6']);
      assert.ok(((await store.get('a'))?.revision ?? 0) <= r1);
      assert.equal(await store.putAll([]), (await store.list()).revision);
      await store.close();
    });

    it('watches from a revision: replays what came after it, then follows', async () => {
      const store = await open();
      const r1 = await store.put(service('a', ['10.0.0.1']), { owner: 'api' });
      await store.put(service('b', ['10.0.0.2']), { owner: 'api' });
      const seen: StoreEvent[] = [];
      const stop = store.watch(r1, { onEvents: (events) => seen.push(...events) });
      await store.delete('a');
      stop();
      await store.delete('b');
      assert.deepEqual(
        seen.map((e) => [e.kind, e.kind === 'put' ? e.service.spec.name : e.name]),
        [
          ['put', 'b'],
          ['delete', 'a'],
        ],
      );
      await store.close();
    });
  });
}
