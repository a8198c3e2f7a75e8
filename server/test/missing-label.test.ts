/**
 * A missing label and an empty one are the same value everywhere: in the
 * CLA a client is sent, in the key it is cached under and in the tree the
 * kernel is sent. Keys that name Object.prototype members are the trap.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Registry } from 'prom-client';
import { buildAdminApp } from '../src/admin/app.js';
import { scopeValue, type Scope } from '../src/domain/locality.js';
import { Mesh } from '../src/domain/mesh.js';
import { matchPlan, planFor, planKey } from '../src/domain/priorities.js';
import { ClaCache } from '../src/domain/cla-cache.js';
import { LocalStore } from '../src/store/level/local-store.js';
import { MeshFeed } from '../src/store/mesh-feed.js';
import { decodeLocalityTree, encodeLocalityTree } from '../src/resources/tree-codec.js';
import { placementOf } from '../src/sessions/placement.js';
import { client, ep, lb, service } from './support/builders.js';

const KEYS = ['constructor', 'toString', 'hasOwnProperty', '__proto__', 'valueOf', 'team'];

describe('a missing label reads as ""', () => {
  for (const key of KEYS) {
    const scope = `label:${key}` as Scope;
    it(`label:${key}: missing and empty give the same value, plan, cache key and kernel tree`, () => {
      const missing = client();
      const empty = client({ labels: Object.fromEntries([[key, '']]) });
      assert.equal(scopeValue(scope, missing), '');
      assert.equal(scopeValue(scope, empty), '');
      for (const mode of ['strict', 'failover'] as const) {
        const mesh = new Mesh();
        const spec = { ...service('s', [ep({ locality: 'r/z/s' })], lb(mode, [scope])), vip: '10.9.9.9', port: 80 };
        mesh.put(spec);
        const s = mesh.get('s')!;
        const a = planFor(s.tree, s.spec.loadBalancing, missing);
        const b = planFor(s.tree, s.spec.loadBalancing, empty);
        assert.equal(a.key, b.key, mode);
        assert.equal(planKey(matchPlan(s.tree, s.spec.loadBalancing, empty)), b.key);
        assert.equal(a.tiers.length, 1, `${mode}: the endpoint is served`);
        assert.equal(b.tiers.length, 1, `${mode}: the endpoint is served with an empty label too`);
        const tree = decodeLocalityTree(encodeLocalityTree(spec, s.tree.compile()));
        assert.deepEqual(
          tree.nodes.map((n) => n.value),
          ['', ''],
          'the endpoint sits under the "" value in the kernel tree',
        );
      }
    });
  }

  it('an xDS node label named __proto__ stays a label', () => {
    const md = JSON.parse('{"labels": {"__proto__": "x", "team": "a"}}') as Record<string, unknown>;
    const p = placementOf({
      id: 'n',
      cluster: '',
      locality: { region: '', zone: '', subzone: '' },
      metadata: md,
      userAgentName: '',
    });
    assert.equal(scopeValue('label:__proto__', p), 'x');
    assert.equal(scopeValue('label:team', p), 'a');
  });

  it('/debug/cla gives the endpoint with and without &label.constructor=', async () => {
    const store = await LocalStore.open();
    const feed = await MeshFeed.open(store);
    const app = buildAdminApp({
      store,
      mesh: feed.mesh,
      caughtUp: (revision) => feed.caughtUp(revision),
      claCache: new ClaCache((cla) => new Uint8Array(cla.groups.length)),
      registry: new Registry(),
      clients: () => [],
      ready: () => true,
    });
    await feed.caughtUp(
      await store.put(service('s', [ep({ address: '10.0.0.1', port: 80 })], lb('strict', ['label:constructor'])), {
        owner: 'api',
      }),
    );
    for (const url of ['/debug/cla?service=s', '/debug/cla?service=s&label.constructor=']) {
      const res = await app.inject({ url });
      assert.equal(res.statusCode, 200, res.body);
      const body = res.json() as { priorities: { localities: { endpoints: { address: string }[] }[] }[] };
      assert.deepEqual(
        body.priorities.flatMap((p) => p.localities.flatMap((l) => l.endpoints.map((e) => e.address))),
        ['10.0.0.1'],
        url,
      );
    }
    await app.close();
  });
});
