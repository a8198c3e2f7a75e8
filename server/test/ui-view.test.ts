/** The web view's data: per-node counts from every endpoint, clients placed as the CLA cache keys them, sync states. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Registry } from 'prom-client';
import { buildAdminApp } from '../src/admin/app.js';
import { serviceView, syncOf, treeView, type ViewNode } from '../src/admin/ui-view.js';
import type { Cla } from '../src/domain/cla.js';
import { ClaCache } from '../src/domain/cla-cache.js';
import { Mesh } from '../src/domain/mesh.js';
import type { Scope } from '../src/domain/locality.js';
import { LocalStore } from '../src/store/level/local-store.js';
import { MeshFeed } from '../src/store/mesh-feed.js';
import type { ClientStatus, TypeStatus } from '../src/sessions/client-status.js';
import { CLUSTER_TYPE, ENDPOINT_TYPE, TREE_TYPE } from '../src/resources/type-urls.js';
import { client, ep, lb, service } from './support/builders.js';

function stream(id: number, at: string, types: TypeStatus[], init: Parameters<typeof client>[0] = {}): ClientStatus {
  return {
    streamId: id,
    nodeId: `n${id}`,
    cluster: '',
    peer: `ipv4:127.0.0.1:${4000 + id}`,
    connectedAt: '2026-01-01T00:00:00.000Z',
    placement: client({ locality: at, ...init }),
    types,
  };
}

const acked = (typeUrl: string, subscribed: TypeStatus['subscribed'] = ['echo']): TypeStatus => ({
  typeUrl,
  subscribed,
  versionSent: 'v2',
  nonceSent: '2',
  versionAcked: 'v2',
});

function find(root: ViewNode, path: string): ViewNode {
  let n: ViewNode | undefined = root;
  for (const v of path ? path.split('/') : []) n = n?.children.find((c) => c.value === v);
  assert.ok(n, `no node ${path}`);
  return n;
}

function echoMesh(scopes?: readonly Scope[]) {
  const mesh = new Mesh();
  mesh.put(
    service(
      'echo',
      [
        ep({ address: '10.0.0.1', locality: 'r1/z1/s1', health: 'unhealthy' }),
        ep({ address: '10.0.0.2', locality: 'r1/z1/s2', weight: 3 }),
        ep({ address: '10.0.0.3', locality: 'r1/z2/s1' }),
        ep({ address: '10.0.0.4', locality: 'r2/z1/s1', health: 'draining' }),
      ],
      lb('failover', scopes),
    ),
  );
  const s = mesh.get('echo');
  assert.ok(s);
  return s;
}

describe('serviceView', () => {
  it('counts healthy and total endpoints and healthy weight per node, keeping nodes with nothing routable', () => {
    const v = serviceView(echoMesh(), []);
    const rows: [string, number, number, number][] = [
      ['', 2, 4, 4],
      ['r1', 2, 3, 4],
      ['r1/z1', 1, 2, 3],
      ['r1/z1/s1', 0, 1, 0],
      ['r1/z1/s2', 1, 1, 3],
      ['r2', 0, 1, 0],
      ['r2/z1/s1', 0, 1, 0],
    ];
    for (const [path, healthy, total, weight] of rows) {
      const n = find(v.root, path);
      assert.deepEqual([n.healthy, n.total, n.weight], [healthy, total, weight], path);
    }
    assert.deepEqual(find(v.root, 'r1/z1/s1').endpoints, [{ key: '10.0.0.1:8080', health: 'unhealthy', weight: 1 }]);
    assert.equal(find(v.root, 'r1').endpoints, undefined, 'only leaves list endpoints');
    assert.deepEqual(v.scopes, ['region', 'zone', 'subzone']);
    assert.equal(v.endpointsListed, true);
  });

  it('lists no endpoints above the limit, and counts the same', () => {
    const v = treeView(echoMesh(), 3);
    assert.equal(v.endpointsListed, false);
    assert.equal(find(v.root, 'r1/z1/s1').endpoints, undefined);
    assert.deepEqual([v.root.healthy, v.root.total, v.root.weight], [2, 4, 4]);
  });

  it('places clients on the deepest routable node they reach, agents by their tree subscription', () => {
    const v = serviceView(echoMesh(), [
      stream(1, 'r1/z1/s1', [acked(CLUSTER_TYPE, '*'), acked(ENDPOINT_TYPE)]), // its rack is down: the zone
      stream(2, 'r1/z1/s2', [acked(ENDPOINT_TYPE, '*')]),
      stream(3, 'r2/z1/s1', [acked(ENDPOINT_TYPE)]), // nothing routable in r2: the root
      stream(4, 'r1/z2/s1', [acked(TREE_TYPE)]),
      stream(5, 'r1/z2/s1', [acked(ENDPOINT_TYPE, ['other'])]), // not this service's client
      stream(6, 'r1/z2/s1', [acked(CLUSTER_TYPE, '*')]),
    ]);
    assert.deepEqual(
      v.clients.map((c) => [c.streamId, c.kind, c.treeNode.join('/')]),
      [
        [1, 'client', 'r1/z1'],
        [2, 'client', 'r1/z1/s2'],
        [3, 'client', ''],
        [4, 'agent', 'r1/z2/s1'],
      ],
    );
  });

  it("places clients by the service's own scopes", () => {
    const v = serviceView(echoMesh(['label:team', 'region']), [
      stream(1, 'r1/z9/s9', [acked(ENDPOINT_TYPE)], { labels: { team: '' } }),
    ]);
    // Every endpoint has no team label: the first level is the empty value.
    assert.deepEqual(find(v.root, '/r1').path, ['', 'r1']);
    assert.deepEqual(v.clients[0]?.treeNode, ['', 'r1']);
  });
});

describe('syncOf', () => {
  const cases: [string, Partial<TypeStatus>, string][] = [
    ['nothing sent yet', { versionSent: '', nonceSent: '', versionAcked: '' }, 'pending'],
    ['sent, not acknowledged', { versionSent: 'v2', nonceSent: '2', versionAcked: 'v1' }, 'pending'],
    ['acknowledged', { versionSent: 'v2', nonceSent: '2', versionAcked: 'v2' }, 'acked'],
    [
      'the last response NACKed',
      {
        versionSent: 'v2',
        nonceSent: '2',
        versionAcked: 'v1',
        lastNack: { version: 'v2', nonce: '2', detail: 'bad', at: '' },
      },
      'nacked',
    ],
    [
      'a NACK of an earlier response, the last one acknowledged',
      {
        versionSent: 'v3',
        nonceSent: '3',
        versionAcked: 'v3',
        lastNack: { version: 'v2', nonce: '2', detail: 'bad', at: '' },
      },
      'acked',
    ],
  ];
  for (const [what, status, want] of cases) {
    it(what, () => assert.equal(syncOf({ ...acked(ENDPOINT_TYPE), ...status }), want));
  }
});

describe('admin API: the web view routes', () => {
  async function setup(clients: readonly ClientStatus[] = []) {
    const store = await LocalStore.open();
    const feed = await MeshFeed.open(store);
    const app = buildAdminApp({
      store,
      mesh: feed.mesh,
      caughtUp: (revision) => feed.caughtUp(revision),
      claCache: new ClaCache((cla: Cla) => new Uint8Array(cla.groups.length)),
      registry: new Registry(),
      clients: () => clients,
      ready: () => true,
    });
    return { store, feed, app };
  }

  it('redirects the admin root to /ui/', async () => {
    const { app } = await setup();
    for (const url of ['/', '/ui']) {
      const res = await app.inject(url);
      assert.equal(res.statusCode, 302);
      assert.equal(res.headers.location, '/ui/');
    }
  });

  it("serves only the bundle's files", async () => {
    const { app } = await setup();
    for (const url of ['/ui/nope.js', '/ui/..%2Fpackage.json']) {
      const res = await app.inject(url);
      assert.equal(res.statusCode, 404, url);
      assert.equal(res.json().error.code, 'CANOPY_NOT_FOUND');
    }
  });

  it('lists services and serves a view that answers 304 while unchanged', async () => {
    const { app, store, feed } = await setup([stream(1, 'r1/z1/s2', [acked(ENDPOINT_TYPE)])]);
    await feed.caughtUp(
      await store.put(
        service('echo', [
          ep({ address: '10.0.0.1', locality: 'r1/z1/s1' }),
          ep({ address: '10.0.0.2', locality: 'r1/z1/s2' }),
        ]),
        { owner: 'api' },
      ),
    );
    const list = (await app.inject('/ui/api/services')).json();
    assert.deepEqual(list, {
      services: [{ name: 'echo', endpoints: 2, mode: 'failover', scopes: ['region', 'zone', 'subzone'] }],
    });

    const first = await app.inject('/ui/api/services/echo');
    assert.equal(first.statusCode, 200);
    assert.equal(first.json().root.healthy, 2);
    assert.equal(first.json().clients[0].treeNode.join('/'), 'r1/z1/s2');
    const etag = String(first.headers.etag);
    const again = await app.inject({ url: '/ui/api/services/echo', headers: { 'if-none-match': etag } });
    assert.equal(again.statusCode, 304);
    assert.equal(again.body, '');

    const flipped = ep({ address: '10.0.0.1', locality: 'r1/z1/s1', health: 'unhealthy' });
    await feed.caughtUp((await store.patchEndpoints('echo', [flipped], []))!);
    const changed = await app.inject({ url: '/ui/api/services/echo', headers: { 'if-none-match': etag } });
    assert.equal(changed.statusCode, 200);
    assert.equal(changed.json().root.healthy, 1);
    assert.notEqual(changed.headers.etag, etag);

    const missing = await app.inject('/ui/api/services/nope');
    assert.equal(missing.statusCode, 404);
    assert.equal(missing.json().error.code, 'CANOPY_SERVICE_NOT_FOUND');
  });
});
