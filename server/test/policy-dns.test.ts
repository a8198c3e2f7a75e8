/**
 * Hostname endpoints (issue 22 item 6): the config accepts them with field
 * paths; an Envoy sidecar gets a STRICT_DNS cluster whose load_assignment is
 * its own CLA (the priorities and locality weights EDS would carry), valid by
 * Envoy's protos and validate.rules, warming on nothing; a proxyless client an
 * aggregate over LOGICAL_DNS clusters in its priority order (gRFC A37); the
 * kernel tree names the refusal and an agent's decoder refuses the service.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import type { Client } from '../src/domain/client.js';
import { emptyPlacement, parseLocality } from '../src/domain/locality.js';
import { Mesh } from '../src/domain/mesh.js';
import { endpointKey, type Endpoint, type ServiceSpec } from '../src/domain/service.js';
import { hasHostnames } from '../src/domain/dns-spec.js';
import { parseConfig, parseServiceSpec, serviceSpecToJson } from '../src/domain/spec.js';
import { readValidEndpointList } from '../src/domain/endpoint-list.js';
import { serverClaCache } from '../src/resources/endpoint/endpoint.js';
import { canopyResources } from '../src/resources/registry.js';
import type { Resource } from '../src/resources/resource.js';
import { encodeLocalityTree, tryDecodeLocalityTree } from '../src/resources/tree-codec.js';
import { CLUSTER_TYPE, ENDPOINT_TYPE } from '../src/resources/type-urls.js';
import { loadEnvoyProtos } from '../src/wire/protos.js';
import { flatten } from '../src/wire/rope.js';
import { ep, lb, service } from './support/builders.js';
import { envoyType } from './support/envoy-protos.js';
import { pgvCheckBytes } from './support/pgv.js';

type Obj = Record<string, unknown>;

const at = (loc: string, kind: 'envoy' | 'grpc'): Client => ({
  ...emptyPlacement(),
  locality: parseLocality(loc),
  kind,
});

function anyValue(r: Resource | undefined, typeUrl: string): Uint8Array {
  assert.ok(r, 'resource exists');
  const any = envoyType('google.protobuf.Any').decode(flatten(r.any)) as unknown as {
    type_url: string;
    value: Uint8Array;
  };
  assert.equal(any.type_url, typeUrl);
  return any.value;
}

function decoded(typeName: string, bytes: Uint8Array): Obj {
  const t = envoyType(typeName);
  return t.toObject(t.decode(bytes), { enums: String, longs: Number, arrays: true, defaults: false }) as Obj;
}

function setup(...specs: ServiceSpec[]) {
  const mesh = new Mesh();
  for (const s of specs) mesh.put(s);
  return { mesh, registry: canopyResources(mesh, serverClaCache()) };
}

const dnsService = (): ServiceSpec => ({
  ...service('ext', [
    ep({ address: 'a.example.test', port: 443, locality: 'r1/z1', weight: 2 }),
    ep({ address: 'b.example.test', port: 443, locality: 'r1/z2' }),
    ep({ address: 'c.example.test', port: 443, locality: 'r2/z1' }),
  ]),
  port: 443,
  vip: '10.96.9.9',
});

describe('hostname endpoints in the config', () => {
  it('accepts a hostname (one spelling: lower case, no trailing dot) beside IP literals', () => {
    const r = parseServiceSpec({
      name: 's',
      endpoints: [
        { address: 'API.Example.COM.', port: 443 },
        { address: '10.0.0.1', port: 443 },
      ],
    });
    assert.ok(r.ok, JSON.stringify(!r.ok && r.errors));
    assert.deepEqual(
      r.value.endpoints.map((e) => e.address),
      ['api.example.com', '10.0.0.1'],
    );
    // The compiled fast path builds the same endpoints.
    assert.deepEqual(
      readValidEndpointList([
        { address: 'API.Example.COM.', port: 443 },
        { address: '10.0.0.1', port: 443 },
      ])?.map((e) => e.address),
      ['api.example.com', '10.0.0.1'],
    );
    // The JSON form reads back the same.
    const again = parseServiceSpec(serviceSpecToJson(r.value));
    assert.ok(again.ok);
    assert.deepEqual(again.value, r.value);
  });

  it('refuses what is neither an address nor a hostname, with the field path', () => {
    const bad = ['10.0.0.300', 'under_score.example', '-lead.example', 'a..b', '', 'x'.repeat(64) + '.example'];
    for (const address of bad) {
      const r = parseConfig({
        services: [
          {
            name: 's',
            endpoints: [
              { address: '10.0.0.1', port: 1 },
              { address, port: 1 },
            ],
          },
        ],
      });
      assert.ok(!r.ok, address);
      assert.deepEqual(
        r.errors.map((e) => e.path),
        ['services[0].endpoints[1].address'],
        address,
      );
      assert.match(r.errors[0]!.message, /IPv4 or IPv6 address literal or a DNS hostname/);
    }
  });

  it('reads dns settings; logical (LOGICAL_DNS) takes exactly one endpoint', () => {
    const ok = parseServiceSpec({
      name: 's',
      endpoints: [{ address: 'one.example', port: 80 }],
      dns: { resolution: 'logical', lookupFamily: 'V4_ONLY', refreshRateMs: 30000 },
    });
    assert.ok(ok.ok);
    assert.deepEqual(ok.value.dns, { resolution: 'logical', lookupFamily: 'V4_ONLY', refreshRateMs: 30000 });
    const two = parseConfig({
      services: [
        {
          name: 's',
          endpoints: [
            { address: 'one.example', port: 80 },
            { address: 'two.example', port: 80 },
          ],
          dns: { resolution: 'logical', lookupFamilly: 'ALL' },
        },
      ],
    });
    assert.ok(!two.ok);
    assert.deepEqual(two.errors.map((e) => e.path).sort(), [
      'services[0].dns.lookupFamilly',
      'services[0].dns.resolution',
    ]);
  });
});

describe('an Envoy sidecar: a STRICT_DNS cluster with its own CLA inside', () => {
  it('decodes with Envoy protos, passes validate.rules, and carries the priorities EDS would', () => {
    const { registry } = setup(dnsService());
    for (const loc of ['r1/z1', 'r1/z2', 'r2/z1']) {
      const client = at(loc, 'envoy');
      const bytes = anyValue(registry.get(CLUSTER_TYPE)!.resolve('ext', client), CLUSTER_TYPE);
      assert.deepEqual(pgvCheckBytes('envoy.config.cluster.v3.Cluster', bytes), []);
      const c = decoded('envoy.config.cluster.v3.Cluster', bytes);
      assert.equal(c['type'], 'STRICT_DNS');
      assert.equal(c['eds_cluster_config'], undefined);
      assert.equal(c['dns_lookup_family'], 'V4_PREFERRED');
      assert.equal(c['respect_dns_ttl'], true);
      assert.deepEqual(c['dns_refresh_rate'], { seconds: 5 });
      assert.deepEqual((c['common_lb_config'] as Obj)['locality_weighted_lb_config'], {});
      // The same CLA an EDS cluster gets for this client (the EDS resource is still computed for it).
      const eds = decoded(
        'envoy.config.endpoint.v3.ClusterLoadAssignment',
        anyValue(registry.get(ENDPOINT_TYPE)!.resolve('ext', client), ENDPOINT_TYPE),
      );
      assert.deepEqual(c['load_assignment'], eds);
      const groups = (eds['endpoints'] as Obj[]).map((g) => [
        (g['locality'] as Obj)['zone'],
        g['priority'] ?? 0,
        (g['load_balancing_weight'] as Obj)['value'],
      ]);
      const own = parseLocality(loc).zone;
      assert.equal(groups.find((g) => g[1] === 0)?.[0], own, `${loc}: its own zone is priority 0`);
      const host = ((eds['endpoints'] as Obj[])[0]!['lb_endpoints'] as Obj[])[0]!;
      assert.match(
        String((((host['endpoint'] as Obj)['address'] as Obj)['socket_address'] as Obj)['address']),
        /\.example\.test$/,
      );
    }
    assert.deepEqual(
      registry.get(CLUSTER_TYPE)!.warming!.warms('ext', at('r1/z1', 'envoy')),
      [],
      'a STRICT_DNS cluster waits on no CLA',
    );
  });

  it('carries what EDS would: unhealthy endpoints counted in their priority, whole CLAs on LEDS streams', () => {
    const spec = dnsService();
    const sick = ep({ address: 'd.example.test', port: 443, locality: 'r1/z1', health: 'unhealthy' });
    const { registry } = setup({ ...spec, endpoints: [...spec.endpoints, sick] });
    for (const leds of [false, true]) {
      const client: Client = { ...at('r1/z1', 'envoy'), leds };
      const c = decoded(
        'envoy.config.cluster.v3.Cluster',
        anyValue(registry.get(CLUSTER_TYPE)!.resolve('ext', client), CLUSTER_TYPE),
      );
      const eds = decoded(
        'envoy.config.endpoint.v3.ClusterLoadAssignment',
        anyValue(registry.get(ENDPOINT_TYPE)!.resolve('ext', { ...client, leds: false }), ENDPOINT_TYPE),
      );
      assert.deepEqual(c['load_assignment'], eds, `leds ${leds}`);
      const hosts = ((eds['endpoints'] as Obj[]) ?? []).flatMap((g) => g['lb_endpoints'] as Obj[]);
      assert.ok(
        hosts.some((h) => h['health_status'] === 'UNHEALTHY'),
        'the unhealthy endpoint counts, with its health',
      );
      assert.ok(!JSON.stringify(c['load_assignment']).includes('leds'), 'no LEDS collections inside a cluster');
    }
  });

  it('LOGICAL_DNS for resolution logical, with the one endpoint and the lookup family asked for', () => {
    const spec: ServiceSpec = {
      ...service('one', [ep({ address: 'api.example.test', port: 443, locality: 'r1/z1' })]),
      dns: { resolution: 'logical', lookupFamily: 'V4_ONLY', refreshRateMs: 60_000 },
    };
    const { registry } = setup(spec);
    const bytes = anyValue(registry.get(CLUSTER_TYPE)!.resolve('one', at('r2/z9', 'envoy')), CLUSTER_TYPE);
    assert.deepEqual(pgvCheckBytes('envoy.config.cluster.v3.Cluster', bytes), []);
    const c = decoded('envoy.config.cluster.v3.Cluster', bytes);
    assert.equal(c['type'], 'LOGICAL_DNS');
    assert.equal(c['dns_lookup_family'], 'V4_ONLY');
    assert.deepEqual(c['dns_refresh_rate'], { seconds: 60 });
    const groups = (c['load_assignment'] as Obj)['endpoints'] as Obj[];
    assert.equal(groups.length, 1);
    assert.equal((groups[0]!['lb_endpoints'] as Obj[]).length, 1);
  });

  it('an IP-only service keeps its EDS cluster', () => {
    const { registry } = setup(service('ips', [ep({ locality: 'r1/z1' })]));
    const c = decoded(
      'envoy.config.cluster.v3.Cluster',
      anyValue(registry.get(CLUSTER_TYPE)!.resolve('ips', at('r1/z1', 'envoy')), CLUSTER_TYPE),
    );
    assert.equal(c['type'], 'EDS');
    assert.equal(registry.get(CLUSTER_TYPE)!.warming!.warms('ips', at('r1/z1', 'envoy')).length, 2);
  });

  it('a service becomes a DNS service when a hostname endpoint comes, and an EDS one again when the last goes', () => {
    const ip = ep({ locality: 'r1/z1' });
    const host = ep({ address: 'd.example.test', port: 443, locality: 'r1/z2' });
    const { mesh, registry } = setup(service('mixed', [ip]));
    const typeNow = () =>
      decoded(
        'envoy.config.cluster.v3.Cluster',
        anyValue(registry.get(CLUSTER_TYPE)!.resolve('mixed', at('r1/z1', 'envoy')), CLUSTER_TYPE),
      )['type'];
    assert.equal(typeNow(), 'EDS');
    mesh.patch('mixed', [host]);
    assert.equal(typeNow(), 'STRICT_DNS');
    // A health change of the hostname endpoint (parked, not served) keeps it a DNS service.
    mesh.patch('mixed', [{ ...host, health: 'unhealthy' }]);
    assert.equal(typeNow(), 'STRICT_DNS');
    mesh.patch('mixed', [], [endpointKey(host)]);
    assert.equal(typeNow(), 'EDS');
    mesh.put(service('mixed', [ip, host]));
    assert.equal(typeNow(), 'STRICT_DNS');
  });

  it('whether a service has hostnames follows every upsert and removal, as a scan of its endpoints says', () => {
    const pool = [
      ep({ locality: 'r1/z1' }),
      ep({ locality: 'r1/z2' }),
      ep({ address: 'e.example.test', port: 443, locality: 'r1/z1' }),
      ep({ address: 'f.example.test', port: 443, locality: 'r2/z1' }),
    ];
    const step = fc.record({
      i: fc.nat(pool.length - 1),
      remove: fc.boolean(),
      health: fc.constantFrom('healthy', 'unhealthy', 'terminating'),
    });
    fc.assert(
      fc.property(fc.array(step, { maxLength: 30 }), (steps) => {
        const mesh = new Mesh();
        mesh.put(service('s', []));
        for (const { i, remove, health } of steps) {
          const e = { ...pool[i]!, health: health as Endpoint['health'] };
          if (remove) mesh.patch('s', [], [endpointKey(e)]);
          else mesh.patch('s', [e]);
          const state = mesh.get('s')!;
          assert.equal(state.hasHostnames, hasHostnames(state.endpoints.values()));
        }
      }),
    );
  });
});

describe('a proxyless client: LOGICAL_DNS clusters (gRFC A37)', () => {
  const aggregate = loadEnvoyProtos(['envoy/extensions/clusters/aggregate/v3/cluster.proto']).lookupType(
    'envoy.extensions.clusters.aggregate.v3.ClusterConfig',
  );

  it('several endpoints: an aggregate over one LOGICAL_DNS cluster per endpoint, best priority first', () => {
    const { registry } = setup(dnsService());
    const cds = registry.get(CLUSTER_TYPE)!;
    for (const [loc, first] of [
      ['r1/z2', 'ext/dns/b.example.test:443'],
      ['r2/z1', 'ext/dns/c.example.test:443'],
    ] as const) {
      const c = decoded('envoy.config.cluster.v3.Cluster', anyValue(cds.resolve('ext', at(loc, 'grpc')), CLUSTER_TYPE));
      const typed = (c['cluster_type'] as Obj)['typed_config'] as Obj;
      assert.equal(typed['type_url'], 'type.googleapis.com/envoy.extensions.clusters.aggregate.v3.ClusterConfig');
      const children = (aggregate.toObject(aggregate.decode(typed['value'] as Uint8Array)) as { clusters: string[] })
        .clusters;
      assert.equal(children.length, 3);
      assert.equal(children[0], first, loc);
      for (const name of children) {
        const child = decoded(
          'envoy.config.cluster.v3.Cluster',
          anyValue(cds.resolve(name, at(loc, 'grpc')), CLUSTER_TYPE),
        );
        assert.equal(child['type'], 'LOGICAL_DNS');
        const lbs = ((child['load_assignment'] as Obj)['endpoints'] as Obj[])[0]!['lb_endpoints'] as Obj[];
        assert.equal(lbs.length, 1);
      }
    }
    assert.ok([...cds.touchedBy(new Set(['ext']))].includes('ext/dns/a.example.test:443'));
    assert.equal(cds.resolve('ext/dns/nope.example.test:443', at('r1/z1', 'grpc')), undefined);
  });

  it('one endpoint: one LOGICAL_DNS cluster under the service name', () => {
    const { registry } = setup(service('one', [ep({ address: 'localhost', port: 50051, locality: 'r1/z1' })], lb()));
    const c = decoded(
      'envoy.config.cluster.v3.Cluster',
      anyValue(registry.get(CLUSTER_TYPE)!.resolve('one', at('r1/z1', 'grpc')), CLUSTER_TYPE),
    );
    assert.equal(c['type'], 'LOGICAL_DNS');
  });
});

describe('the kernel path refuses hostname endpoints', () => {
  it('the tree names them; an agent decoding it refuses the service with the reason', () => {
    const { mesh } = setup(dnsService());
    const bytes = encodeLocalityTree(mesh.get('ext')!.spec, mesh.get('ext')!.tree.compile());
    const d = tryDecodeLocalityTree(bytes);
    assert.ok(!d.ok);
    assert.equal(d.service, 'ext');
    assert.match(d.error, /refused: hostname endpoints/);
  });
});
