/**
 * The Mesh feed screens what the store holds by the admin API's rules: rows
 * that an older version, another replica or a direct write left in the store
 * (a port of 70000, a multicast address, a bad name) are left out of the
 * served Mesh, recorded with their field and value, and forgotten once fixed.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import type { Endpoint, ServiceSpec } from '../src/domain/service.js';
import { screenService, skipReason } from '../src/domain/spec-screen.js';
import { LevelJournal } from '../src/store/level/level-journal.js';
import { LocalStore } from '../src/store/level/local-store.js';
import { InputSkips, type InputSkip } from '../src/store/input-skips.js';
import { MeshFeed } from '../src/store/mesh-feed.js';
import { service } from './support/store-contract.js';

const dirs: string[] = [];
after(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** An endpoint as an old row holds it: the rules are not asked. */
const ep = (address: string, port: number, extra: Partial<Endpoint> = {}): Endpoint => ({
  address,
  port,
  locality: { region: 'r1', zone: 'z1', subzone: '' },
  network: '',
  node: '',
  cluster: '',
  labels: {},
  health: 'healthy',
  weight: 1,
  ...extra,
});
const withEndpoints = (name: string, endpoints: Endpoint[]): ServiceSpec => ({
  ...service('x', []),
  name,
  endpoints,
});
const served = (feed: MeshFeed, name: string) => [...(feed.mesh.get(name)?.endpoints.keys() ?? [])].sort();

describe('screening a stored spec (domain/spec-screen.ts)', () => {
  it('leaves out each endpoint the admin API refuses and keeps the rest', () => {
    const bad = [
      ep('10.0.0.2', 70000),
      ep('10.0.0.3', 0),
      ep('10.0.0.4', -5),
      ep('239.1.2.3', 80),
      ep('ff0e::1', 80),
      ep('255.255.255.255', 80),
    ];
    const r = screenService(withEndpoints('web', [ep('10.0.0.1', 80), ...bad]));
    assert.deepEqual(
      r.spec?.endpoints.map((e) => e.address),
      ['10.0.0.1'],
    );
    assert.deepEqual(
      r.skipped.map((s) => [s.endpoint, s.path, s.value, skipReason(s.path)]),
      [
        ['10.0.0.2:70000', 'endpoints[1].port', '70000', 'endpoint.port'],
        ['10.0.0.3:0', 'endpoints[2].port', '0', 'endpoint.port'],
        ['10.0.0.4:-5', 'endpoints[3].port', '-5', 'endpoint.port'],
        ['239.1.2.3:80', 'endpoints[4].address', '"239.1.2.3"', 'endpoint.address'],
        ['[ff0e::1]:80', 'endpoints[5].address', '"ff0e::1"', 'endpoint.address'],
        ['255.255.255.255:80', 'endpoints[6].address', '"255.255.255.255"', 'endpoint.address'],
      ],
    );
    assert.match(r.skipped[3]!.message, /multicast/);
    assert.match(r.skipped[5]!.message, /broadcast/);
  });

  it('refuses a service whole for a bad name or policy, and a row it cannot read', () => {
    const named = screenService(withEndpoints('bad name!', [ep('10.0.0.1', 80)]));
    assert.equal(named.spec, undefined);
    assert.deepEqual(
      named.skipped.map((s) => [s.path, skipReason(s.path)]),
      [['name', 'service.name']],
    );
    const mode = screenService({ ...withEndpoints('web', []), loadBalancing: { mode: 'sideways' } } as never);
    assert.equal(mode.spec, undefined);
    const garbage = screenService({ name: 'web', endpoints: [{ address: 5 }, null] } as never);
    assert.equal(garbage.spec, undefined);
    assert.equal(skipReason(garbage.skipped[0]!.path), 'service.unreadable');
  });

  it('hands back the written endpoint objects when they are valid (memory shared with the store)', () => {
    const list = [ep('10.0.0.1', 80), ep('10.0.0.2', 81)];
    const r = screenService(withEndpoints('web', list));
    assert.equal(r.spec?.endpoints[0], list[0]);
    assert.equal(r.spec?.endpoints[1], list[1]);
  });
});

describe('the Mesh feed on what the store holds', () => {
  it('serves an old row without its bad endpoints, records each, and forgets them once fixed', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-screen-'));
    dirs.push(dir);
    // What an older version wrote: the store itself checks nothing.
    const old = await LocalStore.open(await LevelJournal.open(dir));
    await old.put(withEndpoints('web', [ep('10.0.0.1', 80), ep('10.0.0.2', 70000), ep('239.1.2.3', 80)]), {
      owner: 'kube',
    });
    await old.put(withEndpoints('bad name!', [ep('10.0.0.9', 80)]), { owner: 'kube' });
    await old.put(service('clean', ['10.0.1.1', '10.0.1.2']), { owner: 'file' });
    await old.close();

    const store = await LocalStore.open(await LevelJournal.open(dir));
    const skips = new InputSkips();
    const added: InputSkip[] = [];
    skips.listen({ added: (s) => added.push(s) });
    const feed = await MeshFeed.open(store, { skips });
    assert.deepEqual(served(feed, 'web'), ['10.0.0.1:80']);
    assert.deepEqual(served(feed, 'clean'), ['10.0.1.1:80', '10.0.1.2:80']);
    assert.equal(feed.mesh.get('bad name!'), undefined);
    assert.deepEqual(
      skips.list().map((s) => [s.source, s.object, s.path, s.value, s.reason, s.left]),
      [
        ['kube', 'service bad name!', 'name', '"bad name!"', 'service.name', 'service'],
        ['kube', 'service web, endpoint 239.1.2.3:80', 'address', '"239.1.2.3"', 'endpoint.address', 'endpoint'],
        ['kube', 'service web, endpoint 10.0.0.2:70000', 'port', '70000', 'endpoint.port', 'endpoint'],
      ],
    );
    assert.equal(added.length, 3);

    // A patch that writes another bad endpoint: left out; one that deletes a bad one: its entry goes.
    let rev = await store.patchEndpoints('web', [ep('10.0.0.3', 0), ep('10.0.0.4', 80)], ['10.0.0.2:70000']);
    await feed.caughtUp(rev!);
    assert.deepEqual(served(feed, 'web'), ['10.0.0.1:80', '10.0.0.4:80']);
    assert.deepEqual(
      skips.list().flatMap((s) => (s.service === 'web' ? [s.object] : [])),
      ['service web, endpoint 239.1.2.3:80', 'service web, endpoint 10.0.0.3:0'],
    );
    // A patch that makes a served endpoint invalid (a weight out of range) takes it out of the Mesh.
    rev = await store.patchEndpoints('web', [ep('10.0.0.4', 80, { weight: 0 })], []);
    await feed.caughtUp(rev!);
    assert.deepEqual(served(feed, 'web'), ['10.0.0.1:80']);

    // The whole service written again, clean: every entry of it goes; the refused service deleted: its entry too.
    rev = await store.put(withEndpoints('web', [ep('10.0.0.1', 80), ep('10.0.0.4', 80)]), { owner: 'kube' });
    await feed.caughtUp(rev);
    rev = (await store.delete('bad name!'))!;
    await feed.caughtUp(rev);
    assert.deepEqual(served(feed, 'web'), ['10.0.0.1:80', '10.0.0.4:80']);
    assert.deepEqual(skips.list(), []);
    assert.equal(added.length, 5, 'each bad part announced once');
    feed.close();
    await store.close();
  });

  it('names where each service came from, for a NACK log line', async () => {
    const store = await LocalStore.open();
    const feed = await MeshFeed.open(store);
    await store.put(service('web.shop', ['10.0.0.1']), { owner: 'kube' });
    await store.put(service('db', ['10.0.0.2']), { owner: 'file' });
    await feed.caughtUp(await store.put(service('api', ['10.0.0.3']), { owner: 'api' }));
    assert.equal(feed.originOf('web.shop'), 'Kubernetes Service shop/web');
    assert.equal(feed.originOf('db'), 'the config file');
    assert.equal(feed.originOf('api'), 'the admin API');
    assert.equal(feed.originOf('nothing'), undefined);
    feed.close();
    await store.close();
  });

  it('a clean service that turns bad is taken out whole; fixed, it is served again', async () => {
    const store = await LocalStore.open();
    const feed = await MeshFeed.open(store);
    let rev = await store.put(service('web', ['10.0.0.1']), { owner: 'api' });
    await feed.caughtUp(rev);
    rev = await store.put({ ...service('web', ['10.0.0.1']), port: 70000 }, { owner: 'api' });
    await feed.caughtUp(rev);
    assert.equal(feed.mesh.get('web'), undefined);
    assert.deepEqual(
      feed.skips.list().map((s) => [s.path, s.value, s.left]),
      [['port', '70000', 'service']],
    );
    // A patch of the refused service is applied to what the store holds and screened again: still out.
    rev = (await store.patchEndpoints('web', [ep('10.0.0.2', 80)], []))!;
    await feed.caughtUp(rev);
    assert.equal(feed.mesh.get('web'), undefined);
    rev = await store.put(service('web', ['10.0.0.1', '10.0.0.2']), { owner: 'api' });
    await feed.caughtUp(rev);
    assert.deepEqual(served(feed, 'web'), ['10.0.0.1:80', '10.0.0.2:80']);
    assert.deepEqual(feed.skips.list(), []);
    feed.close();
    await store.close();
  });
});
