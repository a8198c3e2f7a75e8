/** The admin API through fastify's inject(): a real store, CLA cache and registry. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { LightMyRequestResponse } from 'fastify';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { buildAdminApp } from '../src/admin/app.js';
import { createMetrics } from '../src/admin/metrics.js';
import type { Cla } from '../src/domain/cla.js';
import { ClaCache } from '../src/domain/cla-cache.js';
import { emptyPlacement } from '../src/domain/locality.js';
import { LocalStore } from '../src/store/level/local-store.js';
import { MeshFeed } from '../src/store/mesh-feed.js';
import type { ClientStatus } from '../src/sessions/client-status.js';
import { ENDPOINT_TYPE } from '../src/resources/type-urls.js';

/** Encoding is not under test here: just something whose length changes with the CLA. */
const encode = (cla: Cla) => new TextEncoder().encode(JSON.stringify(cla.groups.map((g) => [g.priority, g.weight])));

interface SetupOptions {
  readonly ready?: () => boolean;
  readonly clients?: () => readonly ClientStatus[];
  readonly logger?: pino.Logger;
}

async function setup(opts: SetupOptions = {}) {
  const store = await LocalStore.open();
  const feed = await MeshFeed.open(store);
  const claCache = new ClaCache(encode);
  const registry = new Registry();
  const metrics = createMetrics(registry, {
    claCache: () => claCache.stats(),
    treeNodes: () => 7,
    connectedClients: () => 3,
  });
  const app = buildAdminApp({
    store,
    mesh: feed.mesh,
    caughtUp: (revision) => feed.caughtUp(revision),
    claCache,
    registry,
    clients: opts.clients ?? (() => []),
    ready: opts.ready ?? (() => true),
    ...(opts.logger ? { logger: opts.logger } : {}),
  });
  return { store, feed, app, metrics };
}

const echo = {
  loadBalancing: { mode: 'failover' },
  endpoints: [
    { address: '10.0.0.1', port: 80, locality: { region: 'r1', zone: 'z1', subzone: 's1' } },
    { address: '10.0.0.2', port: 80, locality: { region: 'r1', zone: 'z2', subzone: 's1' } },
    { address: '10.0.0.3', port: 80, locality: { region: 'r2', zone: 'z3', subzone: 's1' } },
  ],
};

async function putEcho(app: Awaited<ReturnType<typeof setup>>['app'], body: object = echo) {
  const res = await app.inject({ method: 'PUT', url: '/api/v1/services/echo', payload: body });
  assert.ok(res.statusCode < 300, res.body);
  return res;
}

/** Every error response has exactly the one shape. */
function assertError(res: LightMyRequestResponse, status: number, code: string) {
  assert.equal(res.statusCode, status, res.body);
  assert.match(String(res.headers['content-type']), /^application\/json/);
  const body = res.json() as { error: { code: string; message: string; fields?: unknown } };
  assert.deepEqual(Object.keys(body), ['error']);
  assert.equal(body.error.code, code);
  assert.equal(typeof body.error.message, 'string');
  return body.error;
}

describe('admin API: services', () => {
  it('creates, reads, lists, replaces and deletes a service', async () => {
    const { app } = await setup();
    const created = await putEcho(app);
    assert.equal(created.statusCode, 201);
    assert.deepEqual(created.json().loadBalancing, {
      mode: 'failover',
      routingPreference: ['region', 'zone', 'subzone'],
      crossNetworkFailover: true,
      overprovisioningFactor: 140,
    });
    assert.deepEqual((await app.inject('/api/v1/services/echo')).json(), created.json());
    assert.deepEqual((await app.inject('/api/v1/services')).json(), { services: [created.json()] });

    const replaced = await putEcho(app, { name: 'echo', endpoints: [echo.endpoints[0]] });
    assert.equal(replaced.statusCode, 200);
    assert.equal((await app.inject('/api/v1/services/echo')).json().endpoints.length, 1);

    const deleted = await app.inject({ method: 'DELETE', url: '/api/v1/services/echo' });
    assert.equal(deleted.statusCode, 204);
    assert.equal(deleted.body, '');
    assertError(await app.inject('/api/v1/services/echo'), 404, 'CANOPY_SERVICE_NOT_FOUND');
    assertError(await app.inject({ method: 'DELETE', url: '/api/v1/services/echo' }), 404, 'CANOPY_SERVICE_NOT_FOUND');
    assert.deepEqual((await app.inject('/api/v1/services')).json(), { services: [] });
  });

  const invalid: [string, unknown, string[]][] = [
    [
      'every bad field',
      { loadBalancing: { mode: 'nope' }, endpoints: [{ address: 'not a host', port: 0 }] },
      ['loadBalancing.mode', 'endpoints[0].address', 'endpoints[0].port'],
    ],
    ['a different name, with the other errors too', { ...echo, name: 'other', vip: 'x' }, ['vip', 'name']],
    ['a list', [echo], ['']],
    ['a typo', { ...echo, endpionts: [] }, ['endpionts']],
  ];
  for (const [what, payload, paths] of invalid) {
    it(`rejects ${what} with 400 and field paths, and changes nothing`, async () => {
      const { app, feed } = await setup();
      await putEcho(app);
      const before = feed.mesh.get('echo');
      const generation = before?.generation;
      const res = await app.inject({ method: 'PUT', url: '/api/v1/services/echo', payload: payload as object });
      const error = assertError(res, 400, 'CANOPY_INVALID_SERVICE');
      assert.deepEqual(
        (error.fields as { path: string }[]).map((f) => f.path),
        paths,
      );
      assert.equal(feed.mesh.get('echo'), before, 'same service state');
      assert.equal(feed.mesh.get('echo')?.generation, generation, 'same generation');
    });
  }

  it('rejects an invalid name in the URL and creates nothing', async () => {
    const { app, feed } = await setup();
    const res = await app.inject({ method: 'PUT', url: '/api/v1/services/-bad', payload: echo });
    const error = assertError(res, 400, 'CANOPY_INVALID_SERVICE');
    assert.deepEqual(
      (error.fields as { path: string }[]).map((f) => f.path),
      ['name'],
    );
    assert.equal(feed.mesh.size, 0);
  });

  it('answers malformed JSON, a missing body and unknown routes in the same shape', async () => {
    const { app } = await setup();
    const junk = await app.inject({
      method: 'PUT',
      url: '/api/v1/services/echo',
      payload: '{not json',
      headers: { 'content-type': 'application/json' },
    });
    assertError(junk, 400, 'CANOPY_BAD_REQUEST');
    assertError(await app.inject({ method: 'PUT', url: '/api/v1/services/echo' }), 400, 'CANOPY_INVALID_SERVICE');
    assertError(await app.inject('/nope'), 404, 'CANOPY_NOT_FOUND');
    assertError(await app.inject({ method: 'POST', url: '/api/v1/services' }), 404, 'CANOPY_NOT_FOUND');
  });

  it('answers a failing dependency with 500 and no internals', async () => {
    const { app } = await setup({
      clients: () => {
        throw new Error('secret detail');
      },
    });
    const error = assertError(await app.inject('/debug/clients'), 500, 'CANOPY_INTERNAL');
    assert.equal(error.message, 'internal error');
  });

  it('logs server errors to the injected logger, and request lines only at debug', async () => {
    const lines: string[] = [];
    const logger = pino({ level: 'info' }, { write: (line: string) => lines.push(line) });
    const { app } = await setup({
      logger,
      clients: () => {
        throw new Error('secret detail');
      },
    });
    await app.inject('/healthz');
    assert.equal(lines.length, 0, 'no request lines at info');
    await app.inject('/debug/clients');
    assert.equal(lines.length, 1);
    assert.match(lines[0] ?? '', /admin request failed.*secret detail|secret detail.*admin request failed/);
  });
});

describe('admin API: PATCH an endpoint', () => {
  const url = (endpoint: string, service = 'echo') =>
    `/api/v1/services/${service}/endpoints/${encodeURIComponent(endpoint)}`;
  const patch = (app: Awaited<ReturnType<typeof setup>>['app'], endpoint: string, payload: object, service = 'echo') =>
    app.inject({ method: 'PATCH', url: url(endpoint, service), payload });

  async function preview(app: Awaited<ReturnType<typeof setup>>['app']): Promise<string[][]> {
    const res = await app.inject('/debug/cla?service=echo&region=r1&zone=z1&subzone=s1');
    assert.equal(res.statusCode, 200, res.body);
    const body = res.json() as { priorities: { localities: { endpoints: { address: string }[] }[] }[] };
    return body.priorities.map((p) => p.localities.flatMap((l) => l.endpoints.map((e) => e.address)));
  }

  it('moves priority 0 to the next zone when a zone goes unhealthy, and back', async () => {
    const { app } = await setup();
    await putEcho(app);
    assert.deepEqual(await preview(app), [['10.0.0.1'], ['10.0.0.2'], ['10.0.0.3']]);

    const res = await patch(app, '10.0.0.1:80', { health: 'unhealthy' });
    assert.equal(res.statusCode, 200);
    assert.deepEqual(res.json(), { ...echo.endpoints[0], labels: {}, health: 'unhealthy', weight: 1 });
    assert.deepEqual(await preview(app), [['10.0.0.2'], ['10.0.0.3']]);

    await patch(app, '10.0.0.1:80', { health: 'healthy' });
    assert.deepEqual(await preview(app), [['10.0.0.1'], ['10.0.0.2'], ['10.0.0.3']]);
  });

  it('changes a weight, and addresses IPv6 endpoints as [address]:port', async () => {
    const { app, feed } = await setup();
    await putEcho(app, { endpoints: [{ address: 'fd00::1', port: 8080 }] });
    const res = await patch(app, '[fd00::1]:8080', { weight: 9 });
    assert.equal(res.statusCode, 200, res.body);
    assert.equal(feed.mesh.get('echo')?.spec.endpoints[0]?.weight, 9);
  });

  it('is 404 for an unknown service or endpoint and 400 for a bad change, changing nothing', async () => {
    const { app, feed } = await setup();
    await putEcho(app);
    const generation = feed.mesh.get('echo')?.generation;
    assertError(await patch(app, '10.9.9.9:80', { health: 'healthy' }), 404, 'CANOPY_ENDPOINT_NOT_FOUND');
    assertError(await patch(app, '10.0.0.1', { health: 'healthy' }), 404, 'CANOPY_ENDPOINT_NOT_FOUND');
    assertError(await patch(app, '10.0.0.1:80', { health: 'healthy' }, 'nope'), 404, 'CANOPY_SERVICE_NOT_FOUND');
    const bad = assertError(
      await patch(app, '10.0.0.1:80', { health: 'meh', weight: 0, port: 1 }),
      400,
      'CANOPY_INVALID_SERVICE',
    );
    assert.deepEqual(
      (bad.fields as { path: string }[]).map((f) => f.path),
      ['port', 'health', 'weight'],
    );
    assert.equal(feed.mesh.get('echo')?.generation, generation);
  });
});

describe('admin API: debug views', () => {
  it('previews a CLA with its cache key, generation and encoded size', async () => {
    const { app, feed } = await setup();
    await putEcho(app);
    const res = await app.inject('/debug/cla?service=echo&region=r2&zone=z3&subzone=s1');
    assert.equal(res.statusCode, 200);
    const locality = (region: string, zone: string, address: string) => ({
      locality: { region, zone, subzone: 's1' },
      weight: 1,
      endpoints: [{ address, port: 80, weight: 1 }],
    });
    const body = res.json();
    assert.equal(typeof body.key, 'string');
    assert.deepEqual(body, {
      service: 'echo',
      key: body.key,
      generation: feed.mesh.get('echo')?.generation,
      overprovisioningFactor: 140,
      priorities: [
        { priority: 0, localities: [locality('r2', 'z3', '10.0.0.3')] },
        { priority: 1, localities: [locality('r1', 'z1', '10.0.0.1'), locality('r1', 'z2', '10.0.0.2')] },
      ],
      bytes: JSON.stringify([
        [0, 1],
        [1, 1],
        [1, 1],
      ]).length,
    });
  });

  it('reads labels and the other placement parameters', async () => {
    const { app } = await setup();
    await putEcho(app, {
      loadBalancing: { mode: 'strict', routingPreference: ['network', 'label:tier'] },
      endpoints: [
        { address: '10.0.0.1', port: 80, network: 'n1', labels: { tier: 'gold' } },
        { address: '10.0.0.2', port: 80, network: 'n1', labels: { tier: 'silver' } },
      ],
    });
    const res = await app.inject('/debug/cla?service=echo&network=n1&label.tier=silver&node=a&cluster=b');
    assert.deepEqual(
      res
        .json()
        .priorities.map(
          (p: { localities: { endpoints: { address: string }[] }[] }) => p.localities[0]?.endpoints[0]?.address,
        ),
      ['10.0.0.2'],
    );
  });

  it('rejects a missing service, unknown or repeated parameters, and unknown services', async () => {
    const { app } = await setup();
    await putEcho(app);
    assertError(await app.inject('/debug/cla'), 400, 'CANOPY_BAD_REQUEST');
    assertError(await app.inject('/debug/cla?service=echo&regoin=r1'), 400, 'CANOPY_BAD_REQUEST');
    assertError(await app.inject('/debug/cla?service=echo&zone=a&zone=b'), 400, 'CANOPY_BAD_REQUEST');
    assertError(await app.inject('/debug/cla?service=nope'), 404, 'CANOPY_SERVICE_NOT_FOUND');
    assertError(await app.inject('/debug/tree/nope'), 404, 'CANOPY_SERVICE_NOT_FOUND');
  });

  it('shows the locality tree as nested JSON', async () => {
    const { app } = await setup();
    await putEcho(app);
    const leaf = (value: string, endpoint: string) => ({
      value,
      depth: 3,
      count: 1,
      children: [],
      endpoints: [endpoint],
    });
    const node = (value: string, depth: number, children: object[], count = children.length) => ({
      value,
      depth,
      count,
      children,
    });
    assert.deepEqual((await app.inject('/debug/tree/echo')).json(), {
      scopes: ['region', 'zone', 'subzone'],
      nodeCount: 9,
      endpoints: 3,
      root: node(
        '',
        0,
        [
          node('r1', 1, [node('z1', 2, [leaf('s1', '10.0.0.1:80')]), node('z2', 2, [leaf('s1', '10.0.0.2:80')])]),
          node('r2', 1, [node('z3', 2, [leaf('s1', '10.0.0.3:80')])]),
        ],
        3,
      ),
    });
  });

  it('lists connected clients', async () => {
    const client: ClientStatus = {
      streamId: 1,
      nodeId: 'n',
      cluster: '',
      peer: 'ipv4:127.0.0.1:1',
      connectedAt: new Date(0).toISOString(),
      placement: emptyPlacement(),
      types: [],
    };
    const { app } = await setup({ clients: () => [client] });
    assert.deepEqual((await app.inject('/debug/clients')).json(), { clients: [client] });
  });
});

describe('admin API: health and metrics', () => {
  it('is live always and ready only when the deps say so', async () => {
    let ready = false;
    const { app } = await setup({ ready: () => ready });
    const healthz = await app.inject('/healthz');
    assert.deepEqual([healthz.statusCode, healthz.json()], [200, { status: 'ok' }]);
    assertError(await app.inject('/readyz'), 503, 'CANOPY_NOT_READY');
    ready = true;
    assert.equal((await app.inject('/readyz')).statusCode, 200);
  });

  it('exposes every metric, fed by the observer and the sources', async () => {
    const { app, metrics } = await setup();
    await putEcho(app);
    await app.inject('/debug/cla?service=echo&region=r1');
    await app.inject('/debug/cla?service=echo&region=r1');
    metrics.responseSent(ENDPOINT_TYPE, 2);
    metrics.pushed(ENDPOINT_TYPE, 0.003);
    metrics.acked(ENDPOINT_TYPE);
    metrics.nacked(ENDPOINT_TYPE, 'node', 'bad');
    metrics.staleNonce(ENDPOINT_TYPE);
    const res = await app.inject('/metrics');
    assert.equal(res.statusCode, 200);
    assert.equal(res.headers['content-type'], metrics.registry.contentType);
    const lines = res.body.split('\n');
    for (const want of [
      'canopy_xds_connected_clients 3',
      'canopy_xds_responses_total{type="EDS"} 1',
      'canopy_xds_push_latency_seconds_bucket{le="0.001",type="EDS"} 0',
      'canopy_xds_push_latency_seconds_bucket{le="0.005",type="EDS"} 1',
      'canopy_xds_push_latency_seconds_bucket{le="10",type="EDS"} 1',
      'canopy_xds_acks_total{type="EDS"} 1',
      'canopy_xds_nacks_total{type="EDS"} 1',
      'canopy_xds_stale_nonces_total{type="EDS"} 1',
      'canopy_cla_cache_hits_total 1',
      'canopy_cla_cache_misses_total 1',
      'canopy_cla_cache_entries 1',
      'canopy_tree_nodes 7',
    ]) {
      assert.ok(lines.includes(want), `missing "${want}"`);
    }
    assert.ok(
      lines.some((l) => l.startsWith('process_cpu_user_seconds_total')),
      'default metrics',
    );
  });
});
