/**
 * LEDS over a delta session: members sent once and then only what changed,
 * bytes shared between streams, reconnect by member versions, opt-outs,
 * deletion, unsubscription, NACKs, and what SotW gets for the LEDS type.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Mesh } from '../src/domain/mesh.js';
import { serverClaCache } from '../src/resources/endpoint/endpoint.js';
import { collectionName, collectionStem, memberName } from '../src/resources/endpoint/leds-names.js';
import { canopyResources } from '../src/resources/registry.js';
import type { CollectionSnapshot } from '../src/resources/resource-type.js';
import { ENDPOINT_TYPE, LEDS_TYPE } from '../src/resources/type-urls.js';
import { diffStep } from '../src/sessions/delta-collections.js';
import { DeltaSession } from '../src/sessions/delta-session.js';
import { handleNow, refreshNow } from '../src/sessions/session.js';
import { SotwSession } from '../src/sessions/sotw-session.js';
import type { DeltaDiscoveryRequest } from '../src/wire/request.js';
import { lb, service } from './support/builders.js';
import { envoyType } from './support/envoy-protos.js';
import {
  decodeDelta,
  deltaResources,
  endpoints,
  envoyNode,
  req,
  setup,
  unpack,
  type Obj,
} from './support/leds-fixtures.js';

describe('LEDS over a delta session', () => {
  function subscribed(registry: ReturnType<typeof setup>['registry'], init: Partial<DeltaDiscoveryRequest> = {}) {
    const s = new DeltaSession(1, 'test', registry);
    const eds = handleNow(s, req(ENDPOINT_TYPE, { node: envoyNode(), subscribe: ['echo'] })).responses[0]!;
    const cla = deltaResources(eds.bytes)[0]!.msg;
    const globs = (cla['endpoints'] as Obj[]).map((e) =>
      String((e['leds_cluster_locality_config'] as Obj)['leds_collection_name']),
    );
    const first = handleNow(s, req(LEDS_TYPE, { subscribe: globs, ...init })).responses[0]!;
    handleNow(s, req(LEDS_TYPE, { responseNonce: first.nonce }));
    return { s, globs, first };
  }

  it('sends every member once, then only the flipped one, sharing the bytes between streams', () => {
    const { mesh, registry } = setup();
    const a = subscribed(registry);
    const b = subscribed(registry);
    assert.equal(deltaResources(a.first.bytes).length, 16);
    const flipped = { ...mesh.get('echo')!.endpoints.get('10.0.5.2:8080')!, health: 'draining' as const };
    mesh.patch('echo', [flipped]);
    const shared = new Map<string, Buffer>();
    const touched = registry.touchedBy(new Set(['echo']));
    assert.ok(a.s.concerns(touched));
    const ra = refreshNow(a.s, shared);
    const rb = refreshNow(b.s, shared);
    assert.deepEqual(
      ra.map((r) => r.typeUrl),
      [LEDS_TYPE],
      'no EDS response',
    );
    const got = deltaResources(ra[0]!.bytes);
    assert.equal(got.length, 1);
    assert.ok(got[0]!.name.endsWith('/10.0.5.2:8080'));
    // Never DRAINING: Envoy would keep counting a host that was UNHEALTHY (domain/envoy-lb.ts).
    assert.equal(got[0]!.msg['health_status'], 'UNHEALTHY');
    assert.ok(ra[0]!.bytes.length < 600, `${ra[0]!.bytes.length} bytes`);
    assert.equal(rb[0]!.bytes, ra[0]!.bytes, 'the same Buffer for both streams');
    const status = a.s.status().types.find((t) => t.typeUrl === LEDS_TYPE)!;
    // CSDS: one entry per glob; the one just changed is not acknowledged yet.
    assert.equal(status.resources!.length, 8);
    const changed = status.resources!.filter((r) => r.state === 'REQUESTED').map((r) => r.name);
    assert.deepEqual(changed, [collectionName('echo', ['r2', 'z1', 's2'])]);
    assert.ok(status.resources!.every((r) => (r.state !== 'REQUESTED' ? r.state === 'ACKED' : true)));
  });

  it('on reconnect, re-sends only stale members and removes vanished ones', () => {
    const { mesh, registry } = setup();
    const { globs, first } = subscribed(registry);
    const held = Object.fromEntries(deltaResources(first.bytes).map((r) => [r.name, r.version]));
    mesh.patch('echo', [{ ...mesh.get('echo')!.endpoints.get('10.0.0.1:8080')!, weight: 3 }], ['10.0.0.2:8080']);
    const s = new DeltaSession(2, 'test', registry);
    handleNow(s, req(ENDPOINT_TYPE, { node: envoyNode(), subscribe: ['echo'] }));
    const r = handleNow(s, req(LEDS_TYPE, { subscribe: globs, initialVersions: held })).responses[0]!;
    const d = decodeDelta(r.bytes);
    const names = deltaResources(r.bytes).map((x) => x.name);
    assert.equal(names.length, 1);
    assert.ok(names[0]!.endsWith('/10.0.0.1:8080'));
    assert.deepEqual(
      (d['removed_resources'] as string[]).map((n) => n.slice(n.lastIndexOf('/') + 1)),
      ['10.0.0.2:8080'],
    );
  });

  it('opting out by node metadata, or the server switch, keeps full CLAs', () => {
    for (const [registry, metadata] of [
      [setup().registry, { 'canopy.leds': false }],
      [setup(false).registry, {}],
    ] as const) {
      const s = new DeltaSession(1, 'test', registry);
      const eds = handleNow(s, req(ENDPOINT_TYPE, { node: envoyNode(metadata), subscribe: ['echo'] })).responses[0]!;
      const cla = deltaResources(eds.bytes)[0]!.msg;
      assert.ok((cla['endpoints'] as Obj[]).every((e) => (e['lb_endpoints'] as Obj[]).length > 0));
    }
  });

  it('a deleted service removes every member it held; an unsubscribed glob is no longer sent', () => {
    const { mesh, registry } = setup();
    const { s, globs } = subscribed(registry);
    const kept = globs[0]!;
    handleNow(s, req(LEDS_TYPE, { unsubscribe: globs.slice(1) }));
    registry.touchedBy(new Set(['echo']));
    const flipped = { ...mesh.get('echo')!.endpoints.get('10.0.7.1:8080')!, health: 'unhealthy' as const };
    mesh.patch('echo', [flipped]);
    const touched = registry.touchedBy(new Set(['echo']));
    assert.deepEqual(
      refreshNow(s, new Map()).filter((r) => r.typeUrl === LEDS_TYPE),
      [],
      'r2/z2/s2 is no longer held',
    );
    assert.deepEqual(
      [...touched.get(LEDS_TYPE)!].filter((n) => n.endsWith('/*')),
      [collectionName('echo', ['r2', 'z2', 's2'])],
    );
    assert.ok(!s.concerns(new Map([[LEDS_TYPE, touched.get(LEDS_TYPE)!]])), `only ${kept} is held`);
    mesh.delete('echo');
    registry.forget('echo');
    registry.touchedBy(new Set(['echo']));
    const out = refreshNow(s, new Map()).find((r) => r.typeUrl === LEDS_TYPE)!;
    const removed = decodeDelta(out.bytes)['removed_resources'] as string[];
    assert.deepEqual(removed.map((n) => n.slice(n.lastIndexOf('/') + 1)).sort(), ['10.0.0.1:8080', '10.0.0.2:8080']);
  });

  it('a NACK of a LEDS response shows per glob in the client status', () => {
    const { mesh, registry } = setup();
    const { s } = subscribed(registry);
    mesh.patch('echo', [{ ...mesh.get('echo')!.endpoints.get('10.0.3.1:8080')!, weight: 5 }]);
    registry.touchedBy(new Set(['echo']));
    const pushed = refreshNow(s, new Map()).find((r) => r.typeUrl === LEDS_TYPE)!;
    handleNow(s, req(LEDS_TYPE, { responseNonce: pushed.nonce, errorDetail: { code: 3, message: 'no' } }));
    const status = s.status().types.find((t) => t.typeUrl === LEDS_TYPE)!;
    const nacked = status.resources!.filter((r) => r.state === 'NACKED').map((r) => r.name);
    assert.deepEqual(nacked, [collectionName('echo', ['r1', 'z2', 's2'])]);
  });

  it('a service with a locality policy is sent full CLAs even to a LEDS client', () => {
    const mesh = new Mesh();
    mesh.put({
      ...service('pol', endpoints()),
      loadBalancing: { ...lb(), policy: { affinity: [{ scope: 'zone', weight: 1 }] } },
    });
    const registry = canopyResources(mesh, serverClaCache());
    const s = new DeltaSession(1, 'test', registry);
    const eds = handleNow(s, req(ENDPOINT_TYPE, { node: envoyNode(), subscribe: ['pol'] })).responses[0]!;
    const cla = deltaResources(eds.bytes)[0]!.msg;
    assert.ok((cla['endpoints'] as Obj[]).every((e) => (e['lb_endpoints'] as Obj[]).length > 0));
  });

  it('SotW: a member name resolves, a glob gets an empty response (no collections in SotW)', () => {
    const { registry } = setup();
    const s = new SotwSession(1, 'test', registry);
    const node = envoyNode();
    const glob = collectionName('echo', ['r1', 'z1', 's1']);
    const member = memberName(collectionStem('echo', ['r1', 'z1', 's1']), '10.0.0.1', 8080);
    const r = handleNow(s, {
      node,
      typeUrl: LEDS_TYPE,
      resourceNames: [glob, member],
      versionInfo: '',
      responseNonce: '',
    }).responses[0]!;
    const t = envoyType('envoy.service.discovery.v3.DiscoveryResponse');
    const d = t.toObject(t.decode(r.bytes), { arrays: true }) as { resources: Obj[] };
    assert.equal(d.resources.length, 1);
    assert.equal(unpack(LEDS_TYPE, d.resources[0]!)['health_status'], 'HEALTHY');
  });

  it('the same snapshot step yields the same diff whatever stream asks', () => {
    const { registry } = setup();
    const glob = collectionName('echo', ['r2', 'z2', 's2']);
    const snap = registry.get(LEDS_TYPE)!.collections!.collection(glob) as CollectionSnapshot;
    assert.equal(diffStep(glob, undefined, snap), diffStep(glob, undefined, snap));
    assert.equal(diffStep(glob, undefined, snap).resources.length, 2);
    assert.deepEqual(diffStep(glob, snap, snap).resources, []);
  });
});
