/** The admin API through fastify's inject(): a real store, CLA cache and registry. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Registry } from 'prom-client';
import { buildAdminApp } from '../src/admin/app.js';
import { createMetrics } from '../src/admin/metrics.js';
import { ClaCache } from '../src/domain/cla-cache.js';
import { ServiceStore } from '../src/store/service-store.js';
import { encodeCla } from '../src/xds/codec.js';

function setup(ready = true) {
  const store = new ServiceStore();
  const claCache = new ClaCache(encodeCla);
  const registry = new Registry();
  createMetrics(registry, { claCache: () => claCache.stats(), treeNodes: () => 7, connectedClients: () => 0 });
  const app = buildAdminApp({ store, claCache, registry, clients: () => [], ready: () => ready });
  return { store, app };
}

const service = {
  loadBalancing: { mode: 'failover' },
  endpoints: [
    { address: '10.0.0.1', port: 80, locality: { region: 'r1', zone: 'z1', subzone: 's1' } },
    { address: '10.0.0.2', port: 80, locality: { region: 'r1', zone: 'z2', subzone: 's1' } },
  ],
};

describe('admin API', () => {
  it('creates, reads, lists, replaces and deletes a service', async () => {
    const { app } = setup();
    const put = await app.inject({ method: 'PUT', url: '/api/v1/services/echo', payload: service });
    assert.equal(put.statusCode, 201);
    assert.equal(put.json().endpoints.length, 2);
    assert.equal((await app.inject({ method: 'PUT', url: '/api/v1/services/echo', payload: service })).statusCode, 200);
    assert.deepEqual((await app.inject('/api/v1/services')).json().services.map((s: { name: string }) => s.name), ['echo']);
    assert.equal((await app.inject('/api/v1/services/echo')).json().loadBalancing.mode, 'failover');
    assert.equal((await app.inject({ method: 'DELETE', url: '/api/v1/services/echo' })).statusCode, 204);
    const gone = await app.inject('/api/v1/services/echo');
    assert.equal(gone.statusCode, 404);
    assert.equal(gone.json().error.code, 'CANOPY_SERVICE_NOT_FOUND');
    assert.equal((await app.inject({ method: 'DELETE', url: '/api/v1/services/echo' })).statusCode, 404);
  });

  it('rejects invalid input with 400, every bad field path, and changes nothing', async () => {
    const { app, store } = setup();
    await app.inject({ method: 'PUT', url: '/api/v1/services/echo', payload: service });
    const before = store.mesh.get('echo')?.spec;
    const bad = await app.inject({
      method: 'PUT',
      url: '/api/v1/services/echo',
      payload: { loadBalancing: { mode: 'nope' }, endpoints: [{ address: 'x', port: 0 }] },
    });
    assert.equal(bad.statusCode, 400);
    const body = bad.json();
    assert.equal(body.error.code, 'CANOPY_INVALID_SERVICE');
    assert.deepEqual(body.error.fields.map((f: { path: string }) => f.path).sort(), [
      'endpoints[0].address',
      'endpoints[0].port',
      'loadBalancing.mode',
    ]);
    assert.equal(store.mesh.get('echo')?.spec, before, 'store unchanged');
    const renamed = await app.inject({ method: 'PUT', url: '/api/v1/services/echo', payload: { ...service, name: 'other' } });
    assert.equal(renamed.statusCode, 400);
    const junk = await app.inject({ method: 'PUT', url: '/api/v1/services/echo', payload: '{not json', headers: { 'content-type': 'application/json' } });
    assert.equal(junk.statusCode, 400);
    assert.equal(junk.json().error.code, 'CANOPY_BAD_REQUEST');
  });

  it('PATCH health moves the previewed CLA to the next priority', async () => {
    const { app } = setup();
    await app.inject({ method: 'PUT', url: '/api/v1/services/echo', payload: service });
    const preview = async () =>
      (await app.inject('/debug/cla?service=echo&region=r1&zone=z1&subzone=s1')).json().priorities.map(
        (p: { localities: { endpoints: { address: string }[] }[] }) => p.localities.flatMap((l) => l.endpoints.map((e) => e.address)),
      );
    assert.deepEqual(await preview(), [['10.0.0.1'], ['10.0.0.2']]);
    const patch = await app.inject({ method: 'PATCH', url: `/api/v1/services/echo/endpoints/${encodeURIComponent('10.0.0.1:80')}`, payload: { health: 'unhealthy' } });
    assert.equal(patch.statusCode, 200);
    assert.deepEqual(await preview(), [['10.0.0.2']]);
    const missing = await app.inject({ method: 'PATCH', url: '/api/v1/services/echo/endpoints/10.9.9.9%3A80', payload: { health: 'healthy' } });
    assert.equal(missing.json().error.code, 'CANOPY_ENDPOINT_NOT_FOUND');
    const bad = await app.inject({ method: 'PATCH', url: '/api/v1/services/echo/endpoints/10.0.0.1%3A80', payload: { health: 'meh' } });
    assert.equal(bad.statusCode, 400);
    assert.equal(bad.json().error.fields[0].path, 'health');
  });

  it('shows the tree, clients, health, readiness and metrics', async () => {
    const { app } = setup(false);
    await app.inject({ method: 'PUT', url: '/api/v1/services/echo', payload: service });
    const tree = (await app.inject('/debug/tree/echo')).json();
    assert.deepEqual(tree.scopes, ['region', 'zone', 'subzone']);
    assert.equal(tree.nodeCount, 6);
    assert.deepEqual(tree.root.children[0].children.map((z: { value: string }) => z.value), ['z1', 'z2']);
    assert.deepEqual((await app.inject('/debug/clients')).json(), { clients: [] });
    assert.equal((await app.inject('/healthz')).statusCode, 200);
    assert.equal((await app.inject('/readyz')).statusCode, 503);
    assert.equal((await app.inject('/debug/cla')).statusCode, 400);
    assert.equal((await app.inject('/nope')).json().error.code, 'CANOPY_NOT_FOUND');
    const metrics = (await app.inject('/metrics')).body;
    for (const name of ['canopy_xds_connected_clients', 'canopy_cla_cache_entries', 'canopy_cla_cache_hits_total', 'canopy_tree_nodes 7', 'canopy_xds_push_latency_seconds']) {
      assert.ok(metrics.includes(name), name);
    }
  });
});
