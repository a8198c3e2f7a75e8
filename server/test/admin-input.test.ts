/**
 * The admin API against bad input and unwanted callers, through inject():
 * address spellings, unspecified addresses, long names, body size, the bulk
 * endpoint route, Host headers, bearer tokens and the write rate limit.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { LightMyRequestResponse } from 'fastify';
import { Registry } from 'prom-client';
import { buildAdminApp, type AdminDeps } from '../src/admin/app.js';
import { ClaCache } from '../src/domain/cla-cache.js';
import { LocalStore } from '../src/store/level/local-store.js';
import { MeshFeed } from '../src/store/mesh-feed.js';

async function setup(extra: Partial<AdminDeps> = {}) {
  const store = await LocalStore.open();
  const feed = await MeshFeed.open(store);
  const app = buildAdminApp({
    store,
    mesh: feed.mesh,
    caughtUp: (r) => feed.caughtUp(r),
    claCache: new ClaCache((cla) => new Uint8Array(cla.groups.length)),
    registry: new Registry(),
    clients: () => [],
    ready: () => true,
    ...extra,
  });
  return { app, feed, store };
}

const ep = (address: string, port = 80) => ({ address, port, locality: { region: 'r1' } });

function errorOf(res: LightMyRequestResponse, status: number, code: string) {
  assert.equal(res.statusCode, status, res.body);
  const body = res.json() as { error: { code: string; message: string; fields?: { path: string; message: string }[] } };
  assert.deepEqual(Object.keys(body), ['error']);
  assert.equal(body.error.code, code);
  return body.error;
}

describe('admin input: addresses', () => {
  const sameAddress: [string, string][] = [
    ['fd00::1', 'FD00::1'],
    ['::1', '0:0:0:0:0:0:0:1'],
    ['2001:db8::1', '2001:0db8:0:0::1'],
  ];
  for (const [a, b] of sameAddress) {
    it(`${a} and ${b} are one endpoint: a duplicate`, async () => {
      const { app } = await setup();
      const res = await app.inject({
        method: 'PUT',
        url: '/api/v1/services/s',
        payload: { endpoints: [ep(a), ep(b)] },
      });
      const error = errorOf(res, 400, 'CANOPY_INVALID_SERVICE');
      assert.deepEqual(
        error.fields?.map((f) => f.path),
        ['endpoints[1]'],
      );
      assert.match(error.fields?.[0]?.message ?? '', /duplicate endpoint/);
    });
  }

  it('refuses unspecified, IPv4-mapped, multicast and broadcast addresses with their field paths', async () => {
    const { app } = await setup();
    const bad = [
      '::ffff:0.0.0.0',
      '::ffff:0:0',
      '::',
      '0.0.0.0',
      '0.1.2.3',
      '::ffff:1.2.3.4',
      '::ffff:102:304',
      '224.0.0.1',
      'ff02::1',
      '255.255.255.255',
    ];
    const res = await app.inject({
      method: 'PUT',
      url: '/api/v1/services/s',
      payload: { endpoints: bad.map((a) => ep(a)) },
    });
    const error = errorOf(res, 400, 'CANOPY_INVALID_SERVICE');
    assert.deepEqual(
      error.fields?.map((f) => f.path),
      bad.map((_, i) => `endpoints[${i}].address`),
    );
    assert.match(error.fields?.[5]?.message ?? '', /give 1\.2\.3\.4 itself/);
  });

  it('stores the canonical spelling and finds it by any spelling', async () => {
    const { app, feed } = await setup();
    const put = await app.inject({
      method: 'PUT',
      url: '/api/v1/services/s',
      payload: { endpoints: [ep('FD00:0::A', 8080)] },
    });
    assert.equal(put.statusCode, 201, put.body);
    assert.deepEqual([...feed.mesh.get('s')!.endpoints.keys()], ['[fd00::a]:8080']);
    const res = await app.inject({
      method: 'PATCH',
      url: `/api/v1/services/s/endpoints/${encodeURIComponent('[FD00:0:0::a]:8080')}`,
      payload: { weight: 4 },
    });
    assert.equal(res.statusCode, 200, res.body);
    assert.equal(feed.mesh.get('s')?.endpoints.get('[fd00::a]:8080')?.weight, 4);
  });

  for (const bad of ['0.0.0.0', '::', '0:0:0:0:0:0:0:0']) {
    it(`rejects the unspecified address ${bad} with its path`, async () => {
      const { app, feed } = await setup();
      const res = await app.inject({
        method: 'PUT',
        url: '/api/v1/services/s',
        payload: { vip: bad, endpoints: [ep(bad)] },
      });
      const error = errorOf(res, 400, 'CANOPY_INVALID_SERVICE');
      assert.deepEqual(
        error.fields?.map((f) => f.path),
        ['vip', 'endpoints[0].address'],
      );
      assert.equal(feed.mesh.size, 0);
    });
  }
});

describe('admin input: names and sizes', () => {
  it('a 253-character name can be created, read, patched and deleted', async () => {
    const { app } = await setup();
    const name = `a${'b'.repeat(251)}c`;
    assert.equal(name.length, 253);
    const url = `/api/v1/services/${name}`;
    assert.equal((await app.inject({ method: 'PUT', url, payload: { endpoints: [ep('10.0.0.1')] } })).statusCode, 201);
    assert.equal((await app.inject({ method: 'GET', url })).json().name, name);
    assert.equal(
      (await app.inject({ method: 'PATCH', url: `${url}/endpoints/10.0.0.1:80`, payload: { weight: 2 } })).statusCode,
      200,
    );
    assert.equal((await app.inject({ method: 'DELETE', url })).statusCode, 204);
  });

  it('a 254-character name is a field error; a very long path is 414, both in the catalog shape', async () => {
    const { app } = await setup();
    const res = await app.inject({
      method: 'PUT',
      url: `/api/v1/services/${'n'.repeat(254)}`,
      payload: { endpoints: [] },
    });
    assert.deepEqual(
      errorOf(res, 400, 'CANOPY_INVALID_SERVICE').fields?.map((f) => f.path),
      ['name'],
    );
    errorOf(
      await app.inject({ method: 'GET', url: `/api/v1/services/${'n'.repeat(5000)}` }),
      414,
      'CANOPY_BAD_REQUEST',
    );
  });

  const big = {
    endpoints: Array.from({ length: 20_000 }, (_, i) => ({
      ...ep(`10.${i >> 16}.${(i >> 8) & 255}.${i & 255}`, 1000 + (i % 50000)),
      labels: { team: 'payments', version: `v${i % 7}` },
    })),
  };
  it('takes a 2.4 MB PUT by default, and answers 413 in the catalog shape over a configured limit', async () => {
    const payload = JSON.stringify(big);
    assert.ok(payload.length > 2_000_000, `payload is ${payload.length} bytes`);
    const { app } = await setup();
    const ok = await app.inject({
      method: 'PUT',
      url: '/api/v1/services/big',
      payload,
      headers: { 'content-type': 'application/json' },
    });
    assert.equal(ok.statusCode, 201, ok.body.slice(0, 300));
    const small = await setup({ bodyLimit: 1024 * 1024 });
    errorOf(
      await small.app.inject({
        method: 'PUT',
        url: '/api/v1/services/big',
        payload,
        headers: { 'content-type': 'application/json' },
      }),
      413,
      'CANOPY_BODY_TOO_LARGE',
    );
    assert.equal(small.feed.mesh.size, 0);
  });
});

describe('admin input: bulk endpoint changes', () => {
  it('upserts, removes and patches many endpoints in one request', async () => {
    const { app, feed } = await setup();
    await app.inject({
      method: 'PUT',
      url: '/api/v1/services/s',
      payload: { endpoints: [ep('10.0.0.1'), ep('10.0.0.2'), ep('10.0.0.3')] },
    });
    const upsert = Array.from({ length: 1000 }, (_, i) => ep(`10.1.${i >> 8}.${i & 255}`));
    const res = await app.inject({
      method: 'PATCH',
      url: '/api/v1/services/s/endpoints',
      payload: {
        upsert,
        remove: ['10.0.0.1:80'],
        patch: [{ endpoint: '10.0.0.2:80', health: 'unhealthy', weight: 5 }],
      },
    });
    assert.equal(res.statusCode, 200, res.body);
    assert.deepEqual(res.json(), { service: 's', upserted: 1001, removed: 1, endpoints: 1002 });
    const s = feed.mesh.get('s')!;
    assert.equal(s.endpoints.has('10.0.0.1:80'), false);
    assert.deepEqual(
      [s.endpoints.get('10.0.0.2:80')?.health, s.endpoints.get('10.0.0.2:80')?.weight],
      ['unhealthy', 5],
    );
  });

  it('reports every bad change with its path and applies none', async () => {
    const { app, feed } = await setup();
    await app.inject({ method: 'PUT', url: '/api/v1/services/s', payload: { endpoints: [ep('10.0.0.1')] } });
    const generation = feed.mesh.get('s')?.generation;
    const res = await app.inject({
      method: 'PATCH',
      url: '/api/v1/services/s/endpoints',
      payload: {
        upsert: [ep('10.0.0.5'), { address: '0.0.0.0', port: 80 }],
        remove: ['nope', '10.0.0.5:80'],
        patch: [
          { endpoint: '10.9.9.9:80', health: 'unhealthy' },
          { endpoint: '10.0.0.1:80', weight: 0 },
        ],
      },
    });
    const error = errorOf(res, 400, 'CANOPY_INVALID_SERVICE');
    assert.deepEqual(
      error.fields?.map((f) => f.path),
      ['upsert[1].address', 'remove[0]', 'remove[1]', 'patch[0].endpoint', 'patch[1].weight'],
    );
    assert.equal(feed.mesh.get('s')?.generation, generation);
  });
});

describe('admin access: Host header, token, rate limit', () => {
  const put = (app: Awaited<ReturnType<typeof setup>>['app'], headers: Record<string, string> = {}) =>
    app.inject({ method: 'PUT', url: '/api/v1/services/s', payload: { endpoints: [ep('10.0.0.1')] }, headers });

  it('refuses reads and writes carrying an unknown DNS name in Host, accepts IP literals, localhost and configured names', async () => {
    const { app, feed } = await setup({ access: { hostnames: ['canopy.internal'] } });
    errorOf(await put(app, { host: 'rebind.attacker.example:18080' }), 421, 'CANOPY_MISDIRECTED');
    assert.equal(feed.mesh.size, 0, 'nothing changed');
    // Reads too: a rebound page must not read the mesh either (issue 19); probes and metrics stay open.
    errorOf(
      await app.inject({ url: '/api/v1/services', headers: { host: 'rebind.attacker.example' } }),
      421,
      'CANOPY_MISDIRECTED',
    );
    errorOf(
      await app.inject({ url: '/debug/clients', headers: { host: 'rebind.attacker.example' } }),
      421,
      'CANOPY_MISDIRECTED',
    );
    assert.equal((await app.inject({ url: '/readyz', headers: { host: 'rebind.attacker.example' } })).statusCode, 200);
    assert.equal((await app.inject({ url: '/api/v1/services', headers: { host: 'canopy.internal' } })).statusCode, 200);
    for (const host of ['127.0.0.1:18080', '[::1]:18080', 'localhost:18080', 'Canopy.Internal:18080', '10.1.2.3']) {
      assert.ok((await put(app, { host })).statusCode < 300, host);
    }
  });

  it('with a token: writes and reads need it, probes and metrics do not, and a 401 changes nothing', async () => {
    const { app, feed } = await setup({ access: { token: 's3cret-token' } });
    const noToken = errorOf(await put(app), 401, 'CANOPY_UNAUTHORIZED');
    assert.match(noToken.message, /Bearer/);
    errorOf(await put(app, { authorization: 'Bearer wrong-token!' }), 401, 'CANOPY_UNAUTHORIZED');
    errorOf(await put(app, { authorization: 's3cret-token' }), 401, 'CANOPY_UNAUTHORIZED');
    assert.equal(feed.mesh.size, 0, 'nothing changed');
    errorOf(await app.inject({ url: '/api/v1/services' }), 401, 'CANOPY_UNAUTHORIZED');
    errorOf(await app.inject({ url: '/debug/clients' }), 401, 'CANOPY_UNAUTHORIZED');
    for (const url of ['/healthz', '/readyz', '/metrics'])
      assert.equal((await app.inject({ url })).statusCode, 200, url);
    assert.equal((await put(app, { authorization: 'Bearer s3cret-token' })).statusCode, 201);
    assert.equal(
      (await app.inject({ url: '/api/v1/services', headers: { authorization: 'bearer s3cret-token' } })).statusCode,
      200,
    );
  });

  it('with a token: the web view page loads without it, its JSON needs it', async () => {
    const { app } = await setup({ access: { token: 's3cret-token' } });
    assert.equal((await app.inject({ url: '/' })).statusCode, 302);
    for (const url of ['/ui/', '/ui/app.js', '/ui/app.css']) {
      assert.notEqual((await app.inject({ url })).statusCode, 401, url);
    }
    errorOf(await app.inject({ url: '/ui/api/services' }), 401, 'CANOPY_UNAUTHORIZED');
    const ok = await app.inject({ url: '/ui/api/services', headers: { authorization: 'Bearer s3cret-token' } });
    assert.equal(ok.statusCode, 200);
  });

  it('with a token and open reads: GETs pass without it, writes still need it', async () => {
    const { app } = await setup({ access: { token: 't', openReads: true } });
    assert.equal((await app.inject({ url: '/api/v1/services' })).statusCode, 200);
    errorOf(await put(app), 401, 'CANOPY_UNAUTHORIZED');
  });

  it('limits writes per client, not reads', async () => {
    const { app } = await setup({ writeRateLimit: { max: 3, windowMs: 60_000 } });
    for (let i = 0; i < 3; i++) assert.ok((await put(app)).statusCode < 300);
    errorOf(await put(app), 429, 'CANOPY_RATE_LIMITED');
    for (let i = 0; i < 5; i++) assert.equal((await app.inject({ url: '/api/v1/services/s' })).statusCode, 200);
  });
});
