/**
 * The Store contract, run against each local backend (memory, and LevelDB on
 * a real temp directory), then the Mesh built from its watch and the
 * config file's ownership rule.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import type { MeshChange } from '../src/domain/mesh.js';
import { endpointKey, type Endpoint } from '../src/domain/service.js';
import { applyFileServices } from '../src/config/file-source.js';
import { LevelJournal } from '../src/store/level/level-journal.js';
import { LocalStore } from '../src/store/level/local-store.js';
import { MeshFeed } from '../src/store/mesh-feed.js';
import { StoreConflict, type Store } from '../src/store/store.js';
import { addressesOf, service, storeContract } from './support/store-contract.js';

const dirs: string[] = [];
after(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});
function tmpDir(): string {
  const d = mkdtempSync(path.join(os.tmpdir(), 'canopy-store-'));
  dirs.push(d);
  return d;
}

const backends: [string, () => Promise<Store>][] = [
  ['memory', () => LocalStore.open()],
  ['level', async () => LocalStore.open(await LevelJournal.open(tmpDir()))],
];

for (const [name, open] of backends) storeContract(name, open);

describe('Store: the LevelDB backend keeps everything across a reopen', () => {
  it('reopens with the services, endpoints, owners and revision it had', async () => {
    const dir = tmpDir();
    const first = await LocalStore.open(await LevelJournal.open(dir));
    await first.put(service('a', ['10.0.0.1', '10.0.0.2', 'fd00::1']), { owner: 'file', fileDigest: 'x' });
    await first.put(service('b', ['10.0.0.3'], { port: 8080 }), { owner: 'api' });
    const a = (await first.get('a'))!.spec.endpoints[0] as Endpoint;
    await first.patchEndpoints('a', [{ ...a, weight: 7 }], ['10.0.0.2:80']);
    await first.put(service('b', ['10.0.0.4']), { owner: 'api' });
    const before = await first.list();
    await first.close();

    const second = await LocalStore.open(await LevelJournal.open(dir));
    const after = await second.list();
    assert.deepEqual(after, before);
    await second.close();
  });

  it('keeps its state values (the load-aware plan) across a reopen', async () => {
    const dir = tmpDir();
    const first = await LocalStore.open(await LevelJournal.open(dir));
    await first.put(service('a', ['10.0.0.1']), { owner: 'api' });
    await first.putState('load-plan', '{"format":1,"services":{}}');
    await first.close();
    const second = await LocalStore.open(await LevelJournal.open(dir));
    assert.equal(await second.getState('load-plan'), '{"format":1,"services":{}}');
    assert.equal((await second.list()).services.length, 1);
    await second.close();
  });

  it('keeps a many-service write across a reopen; a stale one writes nothing', async () => {
    const dir = tmpDir();
    const first = await LocalStore.open(await LevelJournal.open(dir));
    const r1 = await first.put(service('a', ['10.0.0.1']), { owner: 'api' });
    await first.putMany([
      { spec: service('a', ['10.0.0.2', 'fd00::2']), opts: { owner: 'file', fileDigest: 'x', ifRevision: r1 } },
      { spec: service('b', ['10.0.0.3']), opts: { owner: 'file', fileDigest: 'y' } },
    ]);
    const before = await first.list();
    // The second entry's condition fails: neither is written, nor announced.
    const seen: unknown[] = [];
    first.watch(before.revision, { onEvents: (events) => seen.push(...events) });
    await assert.rejects(
      first.putMany([
        { spec: service('c', ['10.0.0.5']), opts: { owner: 'file', ifRevision: 0 } },
        { spec: service('b', ['10.0.0.9']), opts: { owner: 'file', ifRevision: r1 } },
      ]),
      StoreConflict,
    );
    assert.deepEqual(await first.list(), before);
    assert.deepEqual(seen, []);
    await first.close();

    const second = await LocalStore.open(await LevelJournal.open(dir));
    assert.deepEqual(await second.list(), before);
    await second.close();
  });

  it('keeps a service that grows and shrinks (its buckets resized) across a reopen', async () => {
    const dir = tmpDir();
    const first = await LocalStore.open(await LevelJournal.open(dir));
    const addresses = (n: number, from = 0) =>
      Array.from({ length: n }, (_, i) => `10.1.${(from + i) >> 8}.${(from + i) & 255}`);
    await first.put(service('g', addresses(10)), { owner: 'api' });
    // Grown by patches well past one bucket's size, then patched again in its new buckets.
    const added = service('tmp', addresses(1500, 10)).endpoints;
    await first.patchEndpoints('g', added, []);
    await first.patchEndpoints('g', [{ ...added[7]!, weight: 9 }], [`${addresses(1)[0]}:80`]);
    const big = await first.list();
    assert.equal(big.services[0]!.spec.endpoints.length, 1509);
    // Put small again: the buckets it no longer uses are gone, not read back on open.
    await first.put(service('h', addresses(3000)), { owner: 'api' });
    await first.put(service('h', addresses(5)), { owner: 'api' });
    const before = await first.list();
    await first.close();

    const second = await LocalStore.open(await LevelJournal.open(dir));
    const after = await second.list();
    // Endpoints come back in bucket order, not in the order they were written.
    const sorted = (snapshot: typeof before) =>
      snapshot.services.map((x) => ({
        ...x,
        spec: {
          ...x.spec,
          endpoints: [...x.spec.endpoints].sort((p, q) => endpointKey(p).localeCompare(endpointKey(q))),
        },
      }));
    assert.equal(after.revision, before.revision);
    assert.deepEqual(sorted(after), sorted(before));
    assert.equal(after.services.find((x) => x.spec.name === 'h')!.spec.endpoints.length, 5);
    await second.close();
  });

  it('refuses a second open of the same directory with a clear error', async () => {
    const dir = tmpDir();
    const first = await LevelJournal.open(dir);
    await assert.rejects(LevelJournal.open(dir), /in use by another canopy process/);
    await first.close();
  });
});

describe('MeshFeed: the mesh is built from the store', () => {
  it('starts from the snapshot, follows writes, and resolves caughtUp after applying', async () => {
    const store = await LocalStore.open();
    await store.put(service('a', ['10.0.0.1']), { owner: 'api' });
    const feed = await MeshFeed.open(store);
    assert.deepEqual(addressesOf(feed.mesh.get('a')?.spec), ['10.0.0.1']);
    const changes: MeshChange[] = [];
    feed.subscribe((c) => changes.push(...c));
    const r = await store.put(service('a', ['10.0.0.1', '10.0.0.2']), { owner: 'api' });
    await feed.caughtUp(r);
    assert.equal(feed.revision, r);
    assert.deepEqual(changes, [{ service: 'a', kind: 'updated', endpoints: ['10.0.0.2:80'] }]);
    await store.delete('a');
    assert.equal(feed.mesh.get('a'), undefined);
    feed.close();
  });
});

describe('the config file under the ownership rule', () => {
  async function setup() {
    const store = await LocalStore.open();
    const feed = await MeshFeed.open(store);
    return { store, feed };
  }

  it('a reload deletes only file-owned services the file no longer lists', async () => {
    const { store, feed } = await setup();
    await applyFileServices(store, [service('f1', ['10.0.0.1']), service('f2', ['10.0.0.2'])]);
    await store.put(service('api1', ['10.0.1.1']), { owner: 'api' });
    const r = await applyFileServices(store, [service('f1', ['10.0.0.1'])]);
    assert.deepEqual(r, { replaced: [], deleted: ['f2'], unchanged: 1 });
    assert.deepEqual(
      feed.mesh.list().map((s) => s.name),
      ['api1', 'f1'],
    );
  });

  it('an API PATCH of a file-owned endpoint survives reloads until the file changes that service', async () => {
    const { store, feed } = await setup();
    const file = [service('f1', ['10.0.0.1', '10.0.0.2']), service('f2', ['10.0.0.3'])];
    await applyFileServices(store, file);
    const ep = feed.mesh.get('f1')!.endpoints.get('10.0.0.1:80')!;
    await store.patchEndpoints('f1', [{ ...ep, health: 'unhealthy' }], []);
    const health = () => feed.mesh.get('f1')?.endpoints.get('10.0.0.1:80')?.health;

    // An unrelated service edited in the file: the patch stays.
    await applyFileServices(store, [file[0]!, service('f2', ['10.0.0.3', '10.0.0.4'])]);
    assert.equal(health(), 'unhealthy');
    // The same file again (a touch, a restart): the patch stays.
    await applyFileServices(store, [file[0]!, service('f2', ['10.0.0.3', '10.0.0.4'])]);
    assert.equal(health(), 'unhealthy');
    // The file's entry for f1 changes: the file owns f1, its entry replaces the patched one.
    await applyFileServices(store, [service('f1', ['10.0.0.1', '10.0.0.2'], { port: 81 })]);
    assert.equal(health(), 'healthy');
  });

  it('an API PUT takes a file-listed service over until the file changes its entry', async () => {
    const { store, feed } = await setup();
    await applyFileServices(store, [service('f1', ['10.0.0.1'])]);
    const current = await store.get('f1');
    await store.put(service('f1', ['10.0.0.9']), {
      owner: 'api',
      fileDigest: current!.fileDigest!,
      ifRevision: current!.revision,
    });
    await applyFileServices(store, [service('f1', ['10.0.0.1'])]);
    assert.deepEqual(addressesOf(feed.mesh.get('f1')?.spec), ['10.0.0.9'], 'same entry: the API version stays');
    // Owned by the API now: dropping it from the file leaves it.
    await applyFileServices(store, []);
    assert.deepEqual(addressesOf(feed.mesh.get('f1')?.spec), ['10.0.0.9']);
    // Listed again with a different entry: the file takes it back.
    await applyFileServices(store, [service('f1', ['10.0.0.5'])]);
    assert.deepEqual(addressesOf(feed.mesh.get('f1')?.spec), ['10.0.0.5']);
    assert.equal((await store.get('f1'))?.owner, 'file');
  });

  it('an API DELETE of a file-listed service lasts until the next reload lists it', async () => {
    const { store, feed } = await setup();
    await applyFileServices(store, [service('f1', ['10.0.0.1'])]);
    await store.delete('f1');
    assert.equal(feed.mesh.get('f1'), undefined);
    await applyFileServices(store, [service('f1', ['10.0.0.1'])]);
    assert.deepEqual(addressesOf(feed.mesh.get('f1')?.spec), ['10.0.0.1']);
  });
});
