/**
 * The share groups the push orders streams by (ResourceType.shareGroup): for
 * random trees, modes, health states and clients, two clients with the same
 * EDS share group are sent the same CLA bytes (an Envoy's CLA while some
 * endpoint is unhealthy has none: it is left to the placement), and proxyless
 * clients sent the same CLA entry have the same group (so a push lets them
 * through together and encodes their response once).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import type { Client } from '../src/domain/client.js';
import { emptyPlacement, type Scope } from '../src/domain/locality.js';
import { Mesh } from '../src/domain/mesh.js';
import type { Endpoint, Health, LbMode, ServiceSpec } from '../src/domain/service.js';
import type { UnhealthyMode } from '../src/domain/upstream.js';
import { serverClaCache } from '../src/resources/endpoint/endpoint.js';
import { canopyResources } from '../src/resources/registry.js';
import { CLUSTER_TYPE, ENDPOINT_TYPE, LISTENER_TYPE, ROUTE_TYPE } from '../src/resources/type-urls.js';
import { flatten } from '../src/wire/rope.js';
import { ep, lb, service } from './support/builders.js';

const LOCALITIES = ['r0/z0/s0', 'r0/z0/s1', 'r0/z1/s0', 'r1/z0/s0', 'r1/z1/s1', 'r2/z0/s0'];
const CLIENT_LOCALITIES = [...LOCALITIES, 'r0/z0/s9', 'r0/z9/s9', 'r9/z9/s9', '//'];
const SCOPES: readonly (readonly Scope[])[] = [['region', 'zone', 'subzone'], ['region', 'zone'], ['region']];

const caseArb = fc.record({
  endpoints: fc.array(
    fc.record({
      locality: fc.constantFrom(...LOCALITIES),
      health: fc.constantFrom<Health>('healthy', 'healthy', 'unhealthy', 'draining'),
      weight: fc.integer({ min: 1, max: 3 }),
    }),
    { minLength: 1, maxLength: 12 },
  ),
  mode: fc.constantFrom<LbMode>('failover', 'strict', 'random'),
  scopes: fc.constantFrom(...SCOPES),
  reach: fc.option(fc.integer({ min: 1, max: 6 }), { nil: undefined }),
  unhealthy: fc.constantFrom<UnhealthyMode>('park', 'count'),
});

type Case = typeof caseArb extends fc.Arbitrary<infer T> ? T : never;

function specOf(c: Case): ServiceSpec {
  const endpoints = c.endpoints.map((e) => ep({ locality: e.locality, health: e.health, weight: e.weight }));
  const balancing = lb(c.mode, c.scopes);
  return {
    ...service(
      'svc',
      endpoints,
      c.reach !== undefined && c.mode === 'failover' ? { ...balancing, reach: { minEndpoints: c.reach } } : balancing,
    ),
    unhealthy: c.unhealthy,
  };
}

function clients(): Client[] {
  return CLIENT_LOCALITIES.flatMap((where) => {
    const [region = '', zone = '', subzone = ''] = where.split('/');
    const base: Client = { ...emptyPlacement(), locality: { region, zone, subzone } };
    return [base, { ...base, kind: 'envoy' as const }];
  });
}

describe('share groups', () => {
  it('EDS: the same group means the same CLA bytes; proxyless clients with one entry have one group', () => {
    fc.assert(
      fc.property(caseArb, (c) => {
        const mesh = new Mesh();
        mesh.put(specOf(c));
        const eds = canopyResources(mesh, serverClaCache()).get(ENDPOINT_TYPE)!;
        const seen = clients().map((client) => {
          const r = eds.resolve('svc', client)!;
          return {
            client,
            group: eds.shares?.shareGroup('svc', client),
            resource: r,
            bytes: Buffer.from(flatten(r.any)),
          };
        });
        for (const a of seen)
          for (const b of seen) {
            if (a.client.kind !== 'envoy')
              assert.ok(a.group !== undefined, 'a plain service: a group for every client');
            if (a.group !== undefined && a.group === b.group)
              assert.ok(a.bytes.equals(b.bytes), `group ${a.group}: the same bytes`);
            if (a.client.kind !== 'envoy' && b.client.kind !== 'envoy' && a.resource === b.resource)
              assert.equal(a.group, b.group, 'one CLA entry, one group');
          }
      }),
      { numRuns: 200 },
    );
  });

  it('a tree change moves a client to another group when its CLA changes entry', () => {
    const mesh = new Mesh();
    const inA = ep({ locality: 'r/a' });
    const spec = (endpoints: Endpoint[]): ServiceSpec => service('svc', endpoints, lb('failover', ['region', 'zone']));
    mesh.put(spec([inA]));
    const eds = canopyResources(mesh, serverClaCache()).get(ENDPOINT_TYPE)!;
    const inB: Client = { ...emptyPlacement(), locality: { region: 'r', zone: 'b', subzone: '' } };
    const inC: Client = { ...emptyPlacement(), locality: { region: 'r', zone: 'c', subzone: '' } };
    // Zones b and c have no endpoints: both fall back to the region, one group.
    assert.equal(eds.shares?.shareGroup('svc', inB), eds.shares?.shareGroup('svc', inC));
    mesh.put(spec([inA, ep({ locality: 'r/b' })]));
    // Now b has its own zone: b's CLA differs from c's, and so does its group.
    assert.notEqual(eds.shares?.shareGroup('svc', inB), eds.shares?.shareGroup('svc', inC));
    assert.notDeepEqual(flatten(eds.resolve('svc', inB)!.any), flatten(eds.resolve('svc', inC)!.any));
  });

  it("proxyless CDS, LDS and RDS: one group per kind, Envoy's left to the placement", () => {
    const mesh = new Mesh();
    mesh.put({ ...service('svc', [], lb('failover', ['region'])), port: 8080 });
    const registry = canopyResources(mesh, serverClaCache());
    const grpcA: Client = { ...emptyPlacement(), locality: { region: 'a', zone: '', subzone: '' } };
    const grpcB: Client = { ...emptyPlacement(), locality: { region: 'b', zone: 'z', subzone: '' } };
    const envoy: Client = { ...grpcA, kind: 'envoy' };
    for (const typeUrl of [CLUSTER_TYPE, LISTENER_TYPE, ROUTE_TYPE]) {
      const type = registry.get(typeUrl)!;
      const ga = type.shares?.shareGroup('svc', grpcA);
      assert.ok(ga !== undefined, typeUrl);
      assert.equal(ga, type.shares?.shareGroup('svc', grpcB), typeUrl);
      assert.deepEqual(flatten(type.resolve('svc', grpcA)!.any), flatten(type.resolve('svc', grpcB)!.any), typeUrl);
      assert.equal(type.shares?.shareGroup('svc', envoy), undefined, typeUrl);
    }
  });
});
