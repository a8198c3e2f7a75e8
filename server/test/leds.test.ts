/**
 * LEDS: names round-trip, the collection-based CLA an Envoy on delta gets
 * (decoded with Envoy's protos, PGV-clean), and what a health flip, an added
 * and a removed endpoint change: one member, never the CLA (unless weights
 * change), with collection diffs shared across streams.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Mesh } from '../src/domain/mesh.js';
import { serverClaCache } from '../src/resources/endpoint/endpoint.js';
import {
  collectionName,
  escapeSegment,
  memberName,
  collectionStem,
  parseLedsName,
  unescapeSegment,
} from '../src/resources/endpoint/leds-names.js';
import { canopyResources } from '../src/resources/registry.js';
import { ENDPOINT_TYPE, LEDS_TYPE } from '../src/resources/type-urls.js';
import { diffStep } from '../src/sessions/delta-collections.js';
import { flatten } from '../src/wire/rope.js';
import { ep, lb, service } from './support/builders.js';
import { envoyType } from './support/envoy-protos.js';
import { endpoints, setup, unpack, type Obj } from './support/leds-fixtures.js';

/**
 * What Envoy's xdstp encoder (XdsResourceIdentifier::encodeIdPath) percent-encodes in an id path: bytes
 * below ' ', from '~' (0x7e) up, and `%:?#[]`. A collection name must hold none, or Envoy subscribes to
 * another spelling of it (Envoy 1.40 asked for `…/%7E/*` when the CLA said `…/~/*`).
 */
const ENVOY_ENCODES = /[\u0000-\u001f\u007e-\uffff%:?#[\]]/;

describe('LEDS names', () => {
  for (const value of ['', '.', '..', 'us-east-1a', 'a b', 'ü/ß', '~x', '!x', 'a:b', '50%', 'z_1.2']) {
    it(`escapes ${JSON.stringify(value)} to [A-Za-z0-9._!-] and back`, () => {
      const e = escapeSegment(value);
      assert.match(e, /^[A-Za-z0-9._!-]+$/);
      assert.doesNotMatch(e, ENVOY_ENCODES, 'Envoy would percent-encode it');
      assert.notEqual(e, '.');
      assert.notEqual(e, '..');
      assert.equal(unescapeSegment(e), value);
    });
  }

  it('parses collection and member names back', () => {
    const leaf = ['r 1', '', 'z/1'];
    const glob = collectionName('my svc', leaf);
    assert.ok(glob.startsWith('xdstp://canopy/envoy.config.endpoint.v3.LbEndpoint/my!20svc/r!201/!/z!2f1/'));
    assert.ok(glob.endsWith('/*'));
    assert.doesNotMatch(glob.slice('xdstp://'.length), ENVOY_ENCODES, 'the name Envoy subscribes to is the same');
    assert.deepEqual(parseLedsName(glob), { service: 'my svc', leaf });
    const v6 = memberName(collectionStem('my svc', leaf), 'fd00::1', 8080);
    assert.ok(v6.endsWith('/fd00::1:8080'));
    assert.deepEqual(parseLedsName(v6), { service: 'my svc', leaf, member: { address: 'fd00::1', port: 8080 } });
    assert.equal(parseLedsName('xdstp://other/envoy.config.endpoint.v3.LbEndpoint/a/b/*'), undefined);
    assert.equal(parseLedsName(`${collectionStem('s', ['a'])}!zz:80`), undefined);
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
    const snap = leds.collections!.collection(collectionName('echo', ['r1', 'z1', 's1']))!;
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
    for (const e of entries)
      assert.equal(registry.get(LEDS_TYPE)!.collections!.collection(e.name)!.members.size, 2, e.name);
  });

  it("gives every entry of a locality split over several collections the locality's whole weight, as Envoy keeps one per locality", () => {
    // Scopes finer than a locality: two node leaves in r1/z1/s1, both in the client's priority 0.
    const mesh = new Mesh();
    const l = 'r1/z1/s1';
    const eps = [
      ep({ locality: l, node: 'n1', address: '10.9.0.1' }),
      ep({ locality: l, node: 'n1', address: '10.9.0.2' }),
      ep({ locality: l, node: 'n2', address: '10.9.0.3', weight: 3 }),
      ep({ locality: 'r2/z1/s1', node: 'n3', address: '10.9.0.4' }),
    ];
    mesh.put(service('fine', eps, lb('failover', ['region', 'zone', 'subzone', 'node'])));
    const registry = canopyResources(mesh, serverClaCache());
    const r = registry.get(ENDPOINT_TYPE)!.resolve('fine', { ...envoy, leds: true })!;
    const any = envoyType('google.protobuf.Any');
    const cla = unpack(ENDPOINT_TYPE, any.toObject(any.decode(flatten(r.any))) as Obj);
    const entries = (cla['endpoints'] as Obj[]).map((e) => ({
      priority: Number(e['priority'] ?? 0),
      locality: JSON.stringify(e['locality']),
      weight: Number((e['load_balancing_weight'] as Obj)['value']),
      name: String((e['leds_cluster_locality_config'] as Obj)['leds_collection_name']),
    }));
    const local = entries.filter((e) => e.priority === 0);
    assert.deepEqual(
      local.map((e) => e.name),
      [collectionName('fine', ['r1', 'z1', 's1', 'n1']), collectionName('fine', ['r1', 'z1', 's1', 'n2'])],
    );
    assert.equal(new Set(local.map((e) => e.locality)).size, 1);
    // Envoy's map of (priority, locality) → weight, last entry winning, holds the locality's total (1 + 1 + 3).
    const envoyWeights = new Map(entries.map((e) => [`${e.priority}|${e.locality}`, e.weight]));
    assert.equal(envoyWeights.get(`0|${local[0]!.locality}`), 5);
    assert.ok(local.every((e) => e.weight === 5));
    assert.deepEqual(
      entries.filter((e) => e.priority === 1).map((e) => e.weight),
      [1],
    );
  });

  it('a health flip changes one member and no CLA; an added endpoint changes its collection and its weight', () => {
    const { mesh, registry } = setup();
    const eds = registry.get(ENDPOINT_TYPE)!;
    const leds = registry.get(LEDS_TYPE)!;
    const glob = collectionName('echo', ['r1', 'z1', 's1']);
    const client = { ...envoy, leds: true };
    const before = eds.resolve('echo', client)!;
    const snap = leds.collections!.collection(glob)!;
    registry.touchedBy(new Set(['echo']));
    const flipped = { ...mesh.get('echo')!.endpoints.get('10.0.0.1:8080')!, health: 'unhealthy' as const };
    mesh.patch('echo', [flipped]);
    const touched = registry.touchedBy(new Set(['echo']));
    const member = memberName(collectionStem('echo', ['r1', 'z1', 's1']), '10.0.0.1', 8080);
    assert.deepEqual([...touched.get(LEDS_TYPE)!].sort(), [glob, member].sort());
    const after = eds.resolve('echo', client)!;
    assert.equal(after.hash, before.hash, 'the LEDS CLA is unchanged');
    const next = leds.collections!.collection(glob)!;
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
    const grown = leds.collections!.collection(glob)!;
    assert.deepEqual(
      diffStep(glob, next, grown).resources.map((r) => r.name),
      [memberName(collectionStem('echo', ['r1', 'z1', 's1']), '10.0.0.3', 8080)],
    );
    assert.notEqual(eds.resolve('echo', client)!.hash, before.hash, 'the piece weight changed');
    mesh.patch('echo', [], ['10.0.0.3:8080']);
    assert.deepEqual(diffStep(glob, grown, leds.collections!.collection(glob)).removed, [
      memberName(collectionStem('echo', ['r1', 'z1', 's1']), '10.0.0.3', 8080),
    ]);
    assert.equal(eds.resolve('echo', client)!.hash, before.hash, 'back to the same structure, the same CLA');
  });
});
