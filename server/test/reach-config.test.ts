/**
 * loadBalancing.reach as input: validation with field paths (config file and
 * admin API), the canonical JSON form, the LevelDB store across a reopen, a
 * reach-only change applied to the mesh, and the admin explain and CLA views.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { Registry } from 'prom-client';
import { buildAdminApp } from '../src/admin/app.js';
import { Mesh } from '../src/domain/mesh.js';
import { parseConfig, parseServiceSpec, serviceSpecToJson } from '../src/domain/spec.js';
import { serverClaCache } from '../src/resources/endpoint/endpoint.js';
import { LevelJournal } from '../src/store/level/level-journal.js';
import { LocalStore } from '../src/store/level/local-store.js';
import { MeshFeed } from '../src/store/mesh-feed.js';

const loc = (region: string, zone: string) => ({ region, zone, subzone: 's1' });
const echo = {
  name: 'echo',
  loadBalancing: { mode: 'failover', reach: { minEndpoints: 2 } },
  endpoints: [
    { address: '127.0.0.1', port: 80, locality: loc('r1', 'z1') },
    { address: '127.0.0.2', port: 80, locality: loc('r1', 'z2') },
    { address: '127.0.0.3', port: 80, locality: loc('r2', 'z1') },
  ],
};

describe('reach: validation', () => {
  const bad: [string, unknown, string, RegExp][] = [
    ['a number', 3, 'loadBalancing.reach', /must be an object, got number 3/],
    ['no minEndpoints', {}, 'loadBalancing.reach.minEndpoints', /integer from 1 to 1000000, got nothing/],
    ['zero', { minEndpoints: 0 }, 'loadBalancing.reach.minEndpoints', /integer from 1 to 1000000, got number 0/],
    ['negative', { minEndpoints: -2 }, 'loadBalancing.reach.minEndpoints', /got number -2/],
    ['a fraction', { minEndpoints: 1.5 }, 'loadBalancing.reach.minEndpoints', /got number 1.5/],
    ['a string', { minEndpoints: '3' }, 'loadBalancing.reach.minEndpoints', /got "3"/],
    ['too large', { minEndpoints: 1_000_001 }, 'loadBalancing.reach.minEndpoints', /got number 1000001/],
    [
      'a typo',
      { minEndpoint: 3 },
      'loadBalancing.reach.minEndpoint',
      /unknown field \(expected one of: minEndpoints\)/,
    ],
  ];
  for (const [what, reach, at, message] of bad) {
    it(`rejects ${what} with its field path`, () => {
      const r = parseServiceSpec({ name: 's', loadBalancing: { reach } });
      assert.equal(r.ok, false);
      assert.ok(!r.ok);
      assert.ok(
        r.errors.some((e) => e.path === at && message.test(e.message)),
        JSON.stringify(r.errors),
      );
    });
  }

  it('reports the path inside a config file', () => {
    const r = parseConfig({ services: [{ name: 's', loadBalancing: { reach: { minEndpoints: 0 } } }] });
    assert.ok(!r.ok);
    assert.deepEqual(
      r.errors.map((e) => e.path),
      ['services[0].loadBalancing.reach.minEndpoints'],
    );
  });

  it('is absent by default, and the JSON form carries it only when set, reading back the same', () => {
    const plain = parseServiceSpec({ name: 's' });
    assert.ok(plain.ok);
    assert.equal('reach' in plain.value.loadBalancing, false);
    assert.equal('reach' in (serviceSpecToJson(plain.value)['loadBalancing'] as object), false);
    const set = parseServiceSpec(echo);
    assert.ok(set.ok);
    assert.deepEqual(set.value.loadBalancing.reach, { minEndpoints: 2 });
    const json = serviceSpecToJson(set.value);
    assert.deepEqual((json['loadBalancing'] as { reach: unknown }).reach, { minEndpoints: 2 });
    const again = parseServiceSpec(json);
    assert.ok(again.ok);
    assert.deepEqual(again.value, set.value);
  });

  it('a change of reach alone is a change of the service, and its CLA follows', () => {
    const first = parseServiceSpec(echo);
    const wider = parseServiceSpec({ ...echo, loadBalancing: { mode: 'failover', reach: { minEndpoints: 3 } } });
    assert.ok(first.ok && wider.ok);
    const mesh = new Mesh();
    mesh.put(first.value);
    const cache = serverClaCache();
    const at = { locality: loc('r1', 'z1'), network: '', node: '', cluster: '', labels: {} };
    assert.equal(cache.lookup(mesh.get('echo')!, at).cla.groups.length, 2);
    assert.ok(mesh.put(wider.value), 'reported as a change');
    assert.equal(cache.lookup(mesh.get('echo')!, at).cla.groups.length, 3);
  });
});

describe('reach: the LevelDB store keeps it across a reopen', () => {
  const dirs: string[] = [];
  after(() => {
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });
  it('reads back the same spec', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-reach-'));
    dirs.push(dir);
    const spec = parseServiceSpec(echo);
    assert.ok(spec.ok);
    const first = await LocalStore.open(await LevelJournal.open(dir));
    await first.put(spec.value, { owner: 'api' });
    await first.close();
    const second = await LocalStore.open(await LevelJournal.open(dir));
    assert.deepEqual((await second.get('echo'))?.spec.loadBalancing.reach, { minEndpoints: 2 });
    await second.close();
  });
});

describe('reach: admin API', () => {
  async function setup() {
    const store = await LocalStore.open();
    const feed = await MeshFeed.open(store);
    const app = buildAdminApp({
      store,
      mesh: feed.mesh,
      caughtUp: (revision) => feed.caughtUp(revision),
      claCache: serverClaCache(),
      registry: new Registry(),
      clients: () => [],
      ready: () => true,
    });
    return { app, feed };
  }

  it('PUT takes it, GET returns it; a bad value is a 400 with its field path', async () => {
    const { app, feed } = await setup();
    const put = await app.inject({ method: 'PUT', url: '/api/v1/services/echo', payload: echo });
    assert.equal(put.statusCode, 201, put.body);
    const got = (await app.inject('/api/v1/services/echo')).json() as { loadBalancing: { reach?: unknown } };
    assert.deepEqual(got.loadBalancing.reach, { minEndpoints: 2 });
    const bad = await app.inject({
      method: 'PUT',
      url: '/api/v1/services/echo',
      payload: { ...echo, loadBalancing: { reach: { minEndpoints: 0 } } },
    });
    assert.equal(bad.statusCode, 400);
    const fields = (bad.json() as { error: { fields: { path: string }[] } }).error.fields;
    assert.deepEqual(
      fields.map((f) => f.path),
      ['loadBalancing.reach.minEndpoints'],
    );
    assert.deepEqual(feed.mesh.get('echo')?.spec.loadBalancing.reach, { minEndpoints: 2 }, 'unchanged');
  });

  it('/debug/cla and /debug/explain show the same cut; marking an endpoint unhealthy brings the next tier', async () => {
    const { app } = await setup();
    await app.inject({ method: 'PUT', url: '/api/v1/services/echo', payload: echo });
    const q = 'service=echo&region=r1&zone=z1&subzone=s1';
    const claPriorities = async () =>
      (
        (await app.inject(`/debug/cla?${q}`)).json() as {
          priorities: { priority: number; localities: { endpoints: { address: string }[] }[] }[];
        }
      ).priorities.map((p) => p.localities.flatMap((l) => l.endpoints.map((e) => e.address)));
    type View = { reach?: unknown; endpoints: { address: string; priority: number | null; reason: string }[] };
    const explainView = async () => (await app.inject(`/debug/explain?${q}`)).json() as View;
    assert.deepEqual(await claPriorities(), [['127.0.0.1'], ['127.0.0.2']]);
    const x = await explainView();
    assert.deepEqual(x.reach, { minEndpoints: 2 });
    assert.deepEqual(
      x.endpoints.map((e) => e.priority),
      [0, 1, null],
    );
    assert.match(x.endpoints[2]!.reason, /reach: left out, priorities 0-1 already hold 2 endpoints/);
    const patch = await app.inject({
      method: 'PATCH',
      url: '/api/v1/services/echo/endpoints/127.0.0.1:80',
      payload: { health: 'unhealthy' },
    });
    assert.ok(patch.statusCode < 300, patch.body);
    assert.deepEqual(await claPriorities(), [['127.0.0.2'], ['127.0.0.3']]);
    assert.deepEqual(
      (await explainView()).endpoints.map((e) => e.priority),
      [null, 0, 1],
    );
  });
});
