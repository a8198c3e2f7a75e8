/**
 * The same traffic on SotW and LEDS, and what `canopy explain` says: for random trees, load-balancing
 * modes, health states, overprovisioning factors and `unhealthy: park | count`, the share of new
 * requests an Envoy sidecar sends each endpoint is the same whether it takes the full
 * ClusterLoadAssignment (SotW, or delta without LEDS) or the LEDS CLA plus its collections' members,
 * and equals explain's `envoy.shares`. Shares over the decoded bytes use Envoy's load-balancer
 * arithmetic in server/src/domain/envoy-lb.ts, which e2e/envoy-shares.test.ts checks against a real
 * Envoy 1.40; this runs it over many more shapes than a real Envoy could in a test.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import type { Client } from '../src/domain/client.js';
import { emptyPlacement, localityKey, type Scope } from '../src/domain/locality.js';
import { Mesh } from '../src/domain/mesh.js';
import type { Endpoint, Health, LbMode, ServiceSpec } from '../src/domain/service.js';
import type { UnhealthyMode } from '../src/domain/upstream.js';
import { serverClaCache } from '../src/resources/endpoint/endpoint.js';
import { canopyResources } from '../src/resources/registry.js';
import type { Resource } from '../src/resources/resource.js';
import { ENDPOINT_TYPE, LEDS_TYPE } from '../src/resources/type-urls.js';
import { flatten } from '../src/wire/rope.js';
import { envoyType } from './support/envoy-protos.js';
import { envoyShares, type EnvoyHostSets, type EnvoyShares } from '../src/domain/envoy-lb.js';
import { explain } from '../src/domain/explain.js';
import { envoyHostSetsOf } from './support/envoy-shares.js';
import { pgvCheckBytes } from './support/pgv.js';

type Obj = Record<string, unknown>;
function decodeAny(r: Resource, typeUrl: string): Obj {
  const any = envoyType('google.protobuf.Any').decode(flatten(r.any)) as unknown as {
    type_url: string;
    value: Uint8Array;
  };
  assert.equal(any.type_url, typeUrl);
  assert.deepEqual(pgvCheckBytes(typeUrl, any.value), [], typeUrl);
  const t = envoyType(typeUrl.slice(typeUrl.lastIndexOf('/') + 1));
  return t.toObject(t.decode(any.value), { enums: String, longs: Number, arrays: true }) as Obj;
}

const LOCALITIES = ['r0/z0/s0', 'r0/z0/s1', 'r0/z1/s0', 'r1/z0/s0', 'r1/z1/s1', 'r2/z0/s0'];
const SCOPES: readonly (readonly Scope[])[] = [
  ['region', 'zone', 'subzone'],
  ['region', 'zone'],
  ['region'],
  ['region', 'zone', 'subzone', 'node'],
];

const endpointArb = fc.record({
  locality: fc.constantFrom(...LOCALITIES),
  node: fc.constantFrom('n0', 'n1'),
  health: fc.constantFrom<Health>('healthy', 'healthy', 'healthy', 'unhealthy', 'draining'),
  weight: fc.integer({ min: 1, max: 3 }),
});

const caseArb = fc.record({
  endpoints: fc.array(endpointArb, { minLength: 1, maxLength: 12 }),
  mode: fc.constantFrom<LbMode>('failover', 'strict', 'random'),
  scopes: fc.constantFrom(...SCOPES),
  factor: fc.integer({ min: 100, max: 200 }),
  reach: fc.option(fc.integer({ min: 1, max: 6 }), { nil: undefined }),
  unhealthy: fc.constantFrom<UnhealthyMode>('park', 'count'),
  client: fc.constantFrom(...LOCALITIES, 'r9/z9/s9'),
});

type Case = typeof caseArb extends fc.Arbitrary<infer T> ? T : never;

function specOf(c: Case): ServiceSpec {
  const endpoints: Endpoint[] = c.endpoints.map((e, i) => {
    const [region = '', zone = '', subzone = ''] = e.locality.split('/');
    return {
      address: `10.0.${i >> 8}.${i & 255}`,
      port: 8080,
      locality: { region, zone, subzone },
      network: '',
      node: e.node,
      cluster: '',
      labels: {},
      health: e.health,
      weight: e.weight,
    };
  });
  return {
    name: 'svc',
    loadBalancing: {
      mode: c.mode,
      routingPreference: c.scopes,
      crossNetworkFailover: true,
      overprovisioningFactor: c.factor,
      ...(c.reach !== undefined && c.mode === 'failover' ? { reach: { minEndpoints: c.reach } } : {}),
    },
    endpoints,
    unhealthy: c.unhealthy,
  };
}

/** What one Envoy sidecar holds for the service on the CLA path and on the LEDS path. */
function bothPaths(
  spec: ServiceSpec,
  where: string,
): { sotw: EnvoyHostSets; leds: EnvoyHostSets; factor: number; explained: Record<string, number> } {
  const mesh = new Mesh();
  mesh.put(spec);
  const registry = canopyResources(mesh, serverClaCache());
  const [region = '', zone = '', subzone = ''] = where.split('/');
  const envoy: Client = { ...emptyPlacement(), locality: { region, zone, subzone }, node: 'n0', kind: 'envoy' };
  const eds = registry.get(ENDPOINT_TYPE)!;
  const leds = registry.get(LEDS_TYPE)!;
  const sotwCla = decodeAny(eds.resolve('svc', envoy)!, ENDPOINT_TYPE);
  const ledsCla = decodeAny(eds.resolve('svc', { ...envoy, leds: true })!, ENDPOINT_TYPE);
  const members = (glob: string) => {
    const snap = leds.collections?.collection(glob);
    return snap ? [...snap.members.values()].map((m) => decodeAny(m, LEDS_TYPE)) : [];
  };
  const factor = Number(
    ((sotwCla['policy'] as Obj | undefined)?.['overprovisioning_factor'] as Obj | undefined)?.['value'] ?? 140,
  );
  return {
    sotw: envoyHostSetsOf(sotwCla, () => assert.fail('the CLA path names no collection')),
    leds: envoyHostSetsOf(ledsCla, members),
    factor,
    explained: explain(mesh.get('svc')!, envoy).envoy.shares,
  };
}

function assertSameShares(a: EnvoyShares, b: EnvoyShares | ReadonlyMap<string, number>, what: string): void {
  const bs = b instanceof Map ? b : (b as EnvoyShares).shares;
  if (!(b instanceof Map))
    assert.deepEqual(
      a.priorities.map((p) => p.panic),
      (b as EnvoyShares).priorities.map((p) => p.panic),
      `${what}: panic`,
    );
  const keys = new Set([...a.shares.keys(), ...bs.keys()]);
  for (const k of keys) {
    const x = a.shares.get(k) ?? 0;
    const y = bs.get(k) ?? 0;
    assert.ok(Math.abs(x - y) < 1e-9, `${what}: ${k} gets ${x} on the CLA path, ${y} on the other`);
  }
}

describe('the same traffic on SotW and LEDS', () => {
  it('for random trees, modes, health states and park|count, Envoy computes the same shares; explain agrees', () => {
    fc.assert(
      fc.property(caseArb, (c) => {
        const { sotw, leds, factor, explained } = bothPaths(specOf(c), c.client);
        const onCla = envoyShares(sotw, factor);
        assertSameShares(onCla, envoyShares(leds, factor), 'LEDS');
        assertSameShares(onCla, new Map(Object.entries(explained)), 'explain');
      }),
      { numRuns: 150 },
    );
  });

  it('count: one of two endpoints down in priority 0 spills 30% on; park keeps 100% in priority 0', () => {
    const eps = (health: Health[]) =>
      health.map((h, i) => ({ locality: i < 2 ? 'r0/z0/s0' : 'r1/z0/s0', node: 'n0' as const, health: h, weight: 1 }));
    const base: Case = {
      endpoints: eps(['healthy', 'unhealthy', 'healthy', 'healthy']),
      mode: 'failover',
      scopes: ['region', 'zone', 'subzone'],
      factor: 140,
      reach: undefined,
      unhealthy: 'count',
      client: 'r0/z0/s0',
    };
    const near = (c: Case) => {
      const { sotw, leds, factor } = bothPaths(specOf(c), c.client);
      const a = envoyShares(sotw, factor);
      assertSameShares(a, envoyShares(leds, factor), c.unhealthy);
      return a.shares.get('10.0.0.0:8080')!;
    };
    assert.ok(Math.abs(near(base) - 0.7) < 1e-9, `count: ${near(base)}`);
    assert.ok(Math.abs(near({ ...base, unhealthy: 'park' }) - 1) < 1e-9, 'park');
  });

  it('one LocalityLbEndpoints per locality per priority on the CLA path', () => {
    fc.assert(
      fc.property(caseArb, (c) => {
        const mesh = new Mesh();
        mesh.put(specOf(c));
        const registry = canopyResources(mesh, serverClaCache());
        const envoy: Client = { ...emptyPlacement(), kind: 'envoy' };
        const cla = decodeAny(registry.get(ENDPOINT_TYPE)!.resolve('svc', envoy)!, ENDPOINT_TYPE);
        const seen = new Set<string>();
        for (const g of (cla['endpoints'] as Obj[] | undefined) ?? []) {
          const l = g['locality'] as Obj;
          const key = `${String(g['priority'] ?? 0)}|${localityKey({ region: String(l['region'] ?? ''), zone: String(l['zone'] ?? ''), subzone: String(l['sub_zone'] ?? '') })}`;
          assert.ok(!seen.has(key), `${key} twice`);
          seen.add(key);
        }
      }),
      { numRuns: 100 },
    );
  });
});
