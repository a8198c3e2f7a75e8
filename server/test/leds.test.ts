/**
 * LEDS: names round-trip, the collection-based CLA an Envoy on delta gets
 * (decoded with Envoy's protos, PGV-clean), and what a health flip, an added
 * and a removed endpoint change: one member, never the CLA (unless weights
 * change), with collection diffs shared across streams.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Mesh } from '../src/domain/mesh.js';
import type { Endpoint } from '../src/domain/service.js';
import { serverClaCache } from '../src/resources/endpoint.js';
import {
  collectionName,
  escapeSegment,
  memberName,
  collectionStem,
  parseLedsName,
  unescapeSegment,
} from '../src/resources/leds-names.js';
import { canopyResources } from '../src/resources/registry.js';
import type { CollectionSnapshot } from '../src/resources/resource-type.js';
import { ENDPOINT_TYPE, LEDS_TYPE } from '../src/resources/type-urls.js';
import { DeltaSession } from '../src/sessions/delta-session.js';
import { SotwSession } from '../src/sessions/sotw-session.js';
import { diffStep } from '../src/sessions/delta-collections.js';
import { handleNow, refreshNow } from '../src/sessions/session.js';
import { flatten } from '../src/wire/rope.js';
import type { DeltaDiscoveryRequest, NodeInfo } from '../src/wire/request.js';
import { ep, lb, service } from './support/builders.js';
import { envoyType } from './support/envoy-protos.js';
import { pgvCheckBytes } from './support/pgv.js';

type Obj = Record<string, unknown>;

const LOCALITIES = ['r1/z1/s1', 'r1/z1/s2', 'r1/z2/s1', 'r1/z2/s2', 'r2/z1/s1', 'r2/z1/s2', 'r2/z2/s1', 'r2/z2/s2'];

function endpoints(): Endpoint[] {
  return LOCALITIES.flatMap((l, i) => [
    ep({ locality: l, address: `10.0.${i}.1` }),
    ep({ locality: l, address: `10.0.${i}.2` }),
  ]);
}

function setup(leds = true) {
  const mesh = new Mesh();
  mesh.put(service('echo', endpoints()));
  return { mesh, registry: canopyResources(mesh, serverClaCache(), undefined, { leds }) };
}

function envoyNode(metadata: Record<string, unknown> = {}): NodeInfo {
  return {
    id: 'e1',
    cluster: '',
    locality: { region: 'r1', zone: 'z1', subzone: 's1' },
    metadata,
    userAgentName: 'envoy',
  };
}

function req(typeUrl: string, init: Partial<DeltaDiscoveryRequest> = {}): DeltaDiscoveryRequest {
  return { typeUrl, subscribe: [], unsubscribe: [], initialVersions: {}, responseNonce: '', ...init };
}

function decodeDelta(bytes: Buffer): Obj {
  const t = envoyType('envoy.service.discovery.v3.DeltaDiscoveryResponse');
  return t.toObject(t.decode(bytes), { enums: String, longs: Number, arrays: true }) as Obj;
}

function unpack(typeUrl: string, any: Obj): Obj {
  assert.equal(any['type_url'], typeUrl);
  const name = typeUrl.slice(typeUrl.lastIndexOf('/') + 1);
  const value = any['value'] as Uint8Array;
  assert.deepEqual(pgvCheckBytes(name, value), [], name);
  const t = envoyType(name);
  return t.toObject(t.decode(value), { enums: String, longs: Number, arrays: true }) as Obj;
}

function deltaResources(bytes: Buffer): { name: string; version: string; msg: Obj }[] {
  const d = decodeDelta(bytes);
  const typeUrl = String(d['type_url']);
  return (d['resources'] as Obj[]).map((r) => ({
    name: String(r['name']),
    version: String(r['version']),
    msg: unpack(typeUrl, r['resource'] as Obj),
  }));
}

describe('LEDS names', () => {
  for (const value of ['', '.', '..', 'us-east-1a', 'a b', 'ü/ß', '~x', 'a:b', '50%', 'z_1.2']) {
    it(`escapes ${JSON.stringify(value)} to [A-Za-z0-9._~-] and back`, () => {
      const e = escapeSegment(value);
      assert.match(e, /^[A-Za-z0-9._~-]+$/);
      assert.notEqual(e, '.');
      assert.notEqual(e, '..');
      assert.equal(unescapeSegment(e), value);
    });
  }

  it('parses collection and member names back', () => {
    const leaf = ['r 1', '', 'z/1'];
    const glob = collectionName('my svc', leaf);
    assert.ok(glob.startsWith('xdstp://canopy/envoy.config.endpoint.v3.LbEndpoint/my~20svc/r~201/~/z~2f1/'));
    assert.ok(glob.endsWith('/*'));
    assert.deepEqual(parseLedsName(glob), { service: 'my svc', leaf });
    const v6 = memberName(collectionStem('my svc', leaf), 'fd00::1', 8080);
    assert.ok(v6.endsWith('/fd00::1:8080'));
    assert.deepEqual(parseLedsName(v6), { service: 'my svc', leaf, member: { address: 'fd00::1', port: 8080 } });
    assert.equal(parseLedsName('xdstp://other/envoy.config.endpoint.v3.LbEndpoint/a/b/*'), undefined);
    assert.equal(parseLedsName(`${collectionStem('s', ['a'])}~zz:80`), undefined);
  });
});

describe('LEDS CLA', () => {
  const envoy = {
    locality: { region: 'r1', zone: 'z1', subzone: 's1' },
    network: '',
    node: '',
    cluster: '',
    labels: {},
    kind: 'envoy' as const,
  };

  it('names one collection per leaf with priorities and weights by the client locality, PGV-clean', () => {
    const { registry } = setup();
    const r = registry.get(ENDPOINT_TYPE)!.resolve('echo', { ...envoy, leds: true })!;
    const cla = unpack(
      ENDPOINT_TYPE,
      envoyType('google.protobuf.Any').toObject(envoyType('google.protobuf.Any').decode(flatten(r.any))) as Obj,
    );
    assert.equal(cla['cluster_name'], 'echo');
    assert.deepEqual(cla['policy'], { drop_overloads: [], overprovisioning_factor: { value: 140 } });
    const entries = cla['endpoints'] as Obj[];
    assert.equal(entries.length, 8);
    const byLocality = new Map(entries.map((e) => [Object.values(e['locality'] as Obj).join('/'), e]));
    const expected: [string, number][] = [
      ['r1/z1/s1', 0],
      ['r1/z1/s2', 1],
      ['r1/z2/s1', 2],
      ['r1/z2/s2', 2],
      ['r2/z1/s1', 3],
      ['r2/z1/s2', 3],
      ['r2/z2/s1', 3],
      ['r2/z2/s2', 3],
    ];
    for (const [loc, priority] of expected) {
      const e = byLocality.get(loc);
      assert.ok(e, loc);
      assert.equal(e['priority'] ?? 0, priority, loc);
      assert.deepEqual(e['load_balancing_weight'], { value: 2 });
      assert.deepEqual(e['lb_endpoints'], []);
      const config = e['leds_cluster_locality_config'] as Obj;
      assert.deepEqual(config['leds_config'], { ads: {}, resource_api_version: 'V3', authorities: [] });
      assert.equal(config['leds_collection_name'], collectionName('echo', loc.split('/')));
    }
    // The members of a named collection are Envoy LbEndpoints, PGV-clean.
    const leds = registry.get(LEDS_TYPE)!;
    const snap = leds.collection!(collectionName('echo', ['r1', 'z1', 's1']))!;
    assert.equal(snap.members.size, 2);
    for (const m of snap.members.values()) {
      const lbe = unpack(
        LEDS_TYPE,
        envoyType('google.protobuf.Any').toObject(envoyType('google.protobuf.Any').decode(flatten(m.any))) as Obj,
      );
      assert.equal(lbe['health_status'], 'HEALTHY');
      assert.equal(((lbe['endpoint'] as Obj)['address'] as Obj)['socket_address'] !== undefined, true);
      assert.equal(lbe['load_balancing_weight'], undefined);
    }
  });

  it('is not given to clients that did not take LEDS, nor for a service with a locality policy', () => {
    const { registry } = setup();
    const full = setup(false).registry.get(ENDPOINT_TYPE)!.resolve('echo', envoy)!;
    const eds = registry.get(ENDPOINT_TYPE)!;
    assert.deepEqual(flatten(eds.resolve('echo', envoy)!.any), flatten(full.any));
    assert.notDeepEqual(flatten(eds.resolve('echo', { ...envoy, leds: true })!.any), flatten(full.any));
  });

  it('splits a leaf coarser than a locality by locality: one collection never spans two localities', () => {
    const mesh = new Mesh();
    mesh.put(service('coarse', endpoints(), lb('failover', ['region'])));
    const registry = canopyResources(mesh, serverClaCache());
    const r = registry.get(ENDPOINT_TYPE)!.resolve('coarse', { ...envoy, leds: true })!;
    const any = envoyType('google.protobuf.Any');
    const cla = unpack(ENDPOINT_TYPE, any.toObject(any.decode(flatten(r.any))) as Obj);
    const entries = (cla['endpoints'] as Obj[]).map((e) => ({
      priority: Number(e['priority'] ?? 0),
      name: String((e['leds_cluster_locality_config'] as Obj)['leds_collection_name']),
    }));
    assert.equal(entries.length, 8);
    assert.deepEqual(
      entries.filter((e) => e.priority === 0).map((e) => e.name),
      [
        collectionName('coarse', ['r1', 'z1', 's1']),
        collectionName('coarse', ['r1', 'z1', 's2']),
        collectionName('coarse', ['r1', 'z2', 's1']),
        collectionName('coarse', ['r1', 'z2', 's2']),
      ],
    );
    assert.ok(entries.filter((e) => e.priority === 1).every((e) => e.name.includes('/r2/')));
    for (const e of entries) assert.equal(registry.get(LEDS_TYPE)!.collection!(e.name)!.members.size, 2, e.name);
  });

  it('a health flip changes one member and no CLA; an added endpoint changes its collection and its weight', () => {
    const { mesh, registry } = setup();
    const eds = registry.get(ENDPOINT_TYPE)!;
    const leds = registry.get(LEDS_TYPE)!;
    const glob = collectionName('echo', ['r1', 'z1', 's1']);
    const client = { ...envoy, leds: true };
    const before = eds.resolve('echo', client)!;
    const snap = leds.collection!(glob)!;
    registry.touchedBy(new Set(['echo']));
    const flipped = { ...mesh.get('echo')!.endpoints.get('10.0.0.1:8080')!, health: 'unhealthy' as const };
    mesh.patch('echo', [flipped]);
    const touched = registry.touchedBy(new Set(['echo']));
    const member = memberName(collectionStem('echo', ['r1', 'z1', 's1']), '10.0.0.1', 8080);
    assert.deepEqual([...touched.get(LEDS_TYPE)!].sort(), [glob, member].sort());
    const after = eds.resolve('echo', client)!;
    assert.equal(after.hash, before.hash, 'the LEDS CLA is unchanged');
    const next = leds.collection!(glob)!;
    const step = diffStep(glob, snap, next);
    assert.deepEqual(step.removed, []);
    assert.deepEqual(
      step.resources.map((r) => r.name),
      [member],
    );
    assert.equal(step.key, `${glob}@${snap.id}>${next.id}`);
    assert.equal(diffStep(glob, snap, next), step, 'one diff per (old, new) pair');
    // The other member kept its resource.
    for (const [n, r] of next.members) if (n !== member) assert.equal(r, snap.members.get(n));

    mesh.patch('echo', [ep({ locality: 'r1/z1/s1', address: '10.0.0.3' })]);
    const grown = leds.collection!(glob)!;
    assert.deepEqual(
      diffStep(glob, next, grown).resources.map((r) => r.name),
      [memberName(collectionStem('echo', ['r1', 'z1', 's1']), '10.0.0.3', 8080)],
    );
    assert.notEqual(eds.resolve('echo', client)!.hash, before.hash, 'the piece weight changed');
    mesh.patch('echo', [], ['10.0.0.3:8080']);
    assert.deepEqual(diffStep(glob, grown, leds.collection!(glob)).removed, [
      memberName(collectionStem('echo', ['r1', 'z1', 's1']), '10.0.0.3', 8080),
    ]);
    assert.equal(eds.resolve('echo', client)!.hash, before.hash, 'back to the same structure, the same CLA');
  });
});

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
    assert.equal(got[0]!.msg['health_status'], 'DRAINING');
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
    const snap = registry.get(LEDS_TYPE)!.collection!(glob) as CollectionSnapshot;
    assert.equal(diffStep(glob, undefined, snap), diffStep(glob, undefined, snap));
    assert.equal(diffStep(glob, undefined, snap).resources.length, 2);
    assert.deepEqual(diffStep(glob, snap, snap).resources, []);
  });
});
