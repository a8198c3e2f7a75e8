/**
 * What each kind of client gets for the same service: proxyless gRPC keeps
 * its api_listener byte for byte; an Envoy sidecar gets an outbound listener
 * it can bind (HCM → RDS → router, or tcp_proxy), a cluster with HTTP/2 for
 * gRPC and locality-weighted LB, and its parked endpoints with their health,
 * without changing the split Envoy computes. Every Envoy resource passes the
 * PGV walker and the listener invariants.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Client } from '../src/domain/client.js';
import { emptyPlacement } from '../src/domain/locality.js';
import { Mesh } from '../src/domain/mesh.js';
import type { ServiceSpec } from '../src/domain/service.js';
import { serverClaCache } from '../src/resources/endpoint/endpoint.js';
import { encodeListener } from '../src/resources/listener.js';
import { canopyResources } from '../src/resources/registry.js';
import type { Resource } from '../src/resources/resource.js';
import { CLUSTER_TYPE, ENDPOINT_TYPE, LISTENER_TYPE } from '../src/resources/type-urls.js';
import { clientKindOf, placementOf } from '../src/sessions/placement.js';
import { flatten } from '../src/wire/rope.js';
import type { NodeInfo } from '../src/wire/request.js';
import { ep, lb, service } from './support/builders.js';
import { claShares } from './support/envoy-shares.js';
import { envoyType } from './support/envoy-protos.js';
import { decodeListener, listenerInvariants } from './support/listener-invariants.js';
import { pgvCheckBytes } from './support/pgv.js';

type Obj = Record<string, unknown>;

function node(userAgentName: string, metadata: Record<string, unknown> = {}): NodeInfo {
  return { id: 'n', cluster: '', locality: { region: 'r1', zone: 'z1', subzone: 's1' }, metadata, userAgentName };
}

const envoy: Client = { ...emptyPlacement(), locality: { region: 'r1', zone: 'z1', subzone: 's1' }, kind: 'envoy' };
const grpc: Client = { ...envoy, kind: 'grpc' };

function valueOf(r: Resource | undefined, typeUrl: string): Uint8Array {
  assert.ok(r, 'resource exists');
  const any = envoyType('google.protobuf.Any').decode(flatten(r.any)) as unknown as {
    type_url: string;
    value: Uint8Array;
  };
  assert.equal(any.type_url, typeUrl);
  assert.deepEqual(pgvCheckBytes(typeUrl, any.value), [], typeUrl);
  return any.value;
}

function decoded(typeUrl: string, bytes: Uint8Array): Obj {
  const t = envoyType(typeUrl.slice(typeUrl.lastIndexOf('/') + 1));
  return t.toObject(t.decode(bytes), { enums: String, longs: Number, arrays: true }) as Obj;
}

function unpack(any: Obj): Obj {
  const url = String(any['type_url']);
  return decoded(url, any['value'] as Uint8Array);
}

function setup(...specs: ServiceSpec[]) {
  const mesh = new Mesh();
  for (const s of specs) mesh.put(s);
  return { mesh, registry: canopyResources(mesh, serverClaCache()) };
}

describe('client kinds', () => {
  const cases: [string, NodeInfo | undefined, string][] = [
    ['Envoy by its user agent', node('envoy'), 'envoy'],
    ['grpc-js by its user agent', node('grpc-node-js'), 'grpc'],
    ['C-core by its user agent', node('gRPC Python'), 'grpc'],
    ['the node agent', node('canopy-agent'), 'agent'],
    ['the metadata key over the user agent', node('grpc-node-js', { 'canopy.client_kind': 'envoy' }), 'envoy'],
    ['an unknown metadata value ignored', node('envoy', { 'canopy.client_kind': 'nginx' }), 'envoy'],
    ['no node at all', undefined, 'grpc'],
  ];
  for (const [what, n, kind] of cases) it(`tells ${what}`, () => assert.equal(clientKindOf(n), kind));

  it('reads the outbound address from the metadata, and only an IP literal', () => {
    assert.equal(placementOf(node('envoy', { 'canopy.outbound_address': '127.0.0.1' })).outboundAddress, '127.0.0.1');
    assert.equal(placementOf(node('envoy', { 'canopy.outbound_address': 'localhost' })).outboundAddress, undefined);
  });
});

describe('resources per client kind', () => {
  const echo: ServiceSpec = { ...service('echo', [ep({ locality: 'r1/z1/s1' })]), port: 50051, vip: '10.96.0.10' };

  it('proxyless gRPC keeps the api_listener exactly as before', () => {
    const { registry } = setup(echo);
    const r = registry.get(LISTENER_TYPE)!.resolve('echo', grpc);
    assert.deepEqual(Buffer.from(valueOf(r, LISTENER_TYPE)), Buffer.from(encodeListener('echo', 'echo')));
  });

  it('a stock Envoy sidecar gets an unbound listener on 0.0.0.0:port, HCM → RDS → router, and a gRPC cluster with HTTP/2', () => {
    const { registry } = setup(echo);
    const l = decodeListener(valueOf(registry.get(LISTENER_TYPE)!.resolve('echo', envoy), LISTENER_TYPE));
    assert.deepEqual((l['address'] as Obj)['socket_address'], { address: '0.0.0.0', port_value: 50051 });
    assert.deepEqual(l['bind_to_port'], { value: false });
    assert.equal(l['api_listener'], undefined);
    const chain = (l['filter_chains'] as Obj[])[0]!;
    const hcm = unpack((chain['filters'] as Obj[])[0]!['typed_config'] as Obj);
    assert.deepEqual((hcm['rds'] as Obj)['route_config_name'], 'echo');
    assert.deepEqual(listenerInvariants([l]), []);
    const c = decoded(CLUSTER_TYPE, valueOf(registry.get(CLUSTER_TYPE)!.resolve('echo', envoy), CLUSTER_TYPE));
    assert.equal(c['type'], 'EDS');
    assert.ok((c['eds_cluster_config'] as Obj)['eds_config'], 'EDS over ADS');
    assert.deepEqual((c['common_lb_config'] as Obj)['locality_weighted_lb_config'], {});
    const options = (c['typed_extension_protocol_options'] as Obj)[
      'envoy.extensions.upstreams.http.v3.HttpProtocolOptions'
    ] as Obj;
    assert.deepEqual((unpack(options)['explicit_http_config'] as Obj)['http2_protocol_options'], {
      custom_settings_parameters: [],
    });
    assert.deepEqual(c['connect_timeout'], { seconds: 1 });
  });

  it('binds the outbound address at the outbound port, tcp services through tcp_proxy, http without HTTP/2', () => {
    const tcp: ServiceSpec = { ...service('db', [ep()]), port: 5432, outboundPort: 15432, protocol: 'tcp' };
    const http: ServiceSpec = {
      ...service('web', [ep()]),
      port: 80,
      protocol: 'http',
      outlierDetection: { consecutive5xx: 3, intervalMs: 1500, baseEjectionTimeMs: 30000, maxEjectionPercent: 50 },
      healthCheck: {
        intervalMs: 5000,
        timeoutMs: 1000,
        unhealthyThreshold: 3,
        healthyThreshold: 2,
        path: '/ready',
        grpcServiceName: '',
      },
    };
    const { registry } = setup(tcp, http);
    const local: Client = { ...envoy, outboundAddress: '127.0.0.1' };
    const lt = decodeListener(valueOf(registry.get(LISTENER_TYPE)!.resolve('db', local), LISTENER_TYPE));
    assert.deepEqual((lt['address'] as Obj)['socket_address'], { address: '127.0.0.1', port_value: 15432 });
    const filter = ((lt['filter_chains'] as Obj[])[0]!['filters'] as Obj[])[0]!;
    assert.deepEqual(unpack(filter['typed_config'] as Obj)['cluster'], 'db');
    const lw = decodeListener(valueOf(registry.get(LISTENER_TYPE)!.resolve('web', local), LISTENER_TYPE));
    assert.deepEqual(listenerInvariants([lt, lw]), []);
    const c = decoded(CLUSTER_TYPE, valueOf(registry.get(CLUSTER_TYPE)!.resolve('web', local), CLUSTER_TYPE));
    assert.equal(c['typed_extension_protocol_options'], undefined);
    assert.deepEqual(c['outlier_detection'], {
      consecutive_5xx: { value: 3 },
      interval: { seconds: 1, nanos: 500_000_000 },
      base_ejection_time: { seconds: 30 },
      max_ejection_percent: { value: 50 },
      monitors: [],
    });
    assert.equal(((c['health_checks'] as Obj[])[0]!['http_health_check'] as Obj)['path'], '/ready');
  });

  it('an Envoy sidecar gets no listener for a service with nowhere to bind', () => {
    const { registry } = setup(service('portless', [ep()]));
    assert.equal(registry.get(LISTENER_TYPE)!.resolve('portless', envoy), undefined);
    assert.ok(registry.get(LISTENER_TYPE)!.resolve('portless', grpc), 'proxyless still resolves it');
  });
});

describe('parked endpoints for Envoy (unhealthy: park)', () => {
  const near = [ep({ locality: 'r1/z1/s1' }), ep({ locality: 'r1/z1/s1', weight: 3 })];
  const far = [ep({ locality: 'r2/z1/s1' }), ep({ locality: 'r2/z2/s1' })];
  const draining = ep({ locality: 'r1/z1/s1', health: 'draining' });
  const unhealthy = ep({ locality: 'r2/z1/s1', health: 'unhealthy' });
  const elsewhere = ep({ locality: 'r9/z9/s9', health: 'draining' });

  it('share the CLA with gRPC clients while every endpoint is routable', () => {
    const { registry } = setup(service('svc', [...near, ...far]));
    const eds = registry.get(ENDPOINT_TYPE)!;
    assert.equal(eds.resolve('svc', envoy), eds.resolve('svc', grpc));
  });

  for (const mode of ['failover', 'strict', 'random'] as const) {
    it(`${mode}: are sent with their health after the last priority, and Envoy's split is unchanged`, () => {
      const { registry } = setup({
        ...service('svc', [...near, ...far, draining, unhealthy, elsewhere], lb(mode)),
        unhealthy: 'park',
      });
      const eds = registry.get(ENDPOINT_TYPE)!;
      const forGrpc = decoded(ENDPOINT_TYPE, valueOf(eds.resolve('svc', grpc), ENDPOINT_TYPE));
      const forEnvoy = decoded(ENDPOINT_TYPE, valueOf(eds.resolve('svc', envoy), ENDPOINT_TYPE));
      const statuses = new Map<string, unknown>();
      let lastRoutable = -1;
      for (const g of forEnvoy['endpoints'] as Obj[]) {
        for (const e of g['lb_endpoints'] as Obj[]) {
          const sock = ((e['endpoint'] as Obj)['address'] as Obj)['socket_address'] as Obj;
          statuses.set(String(sock['address']), e['health_status']);
          if (e['health_status'] === undefined) lastRoutable = Math.max(lastRoutable, Number(g['priority'] ?? 0));
        }
      }
      assert.equal(statuses.get(draining.address), 'DRAINING');
      assert.equal(statuses.has(elsewhere.address), false, 'a locality the CLA does not hold is not added');
      const grpcLocalities = new Set((forGrpc['endpoints'] as Obj[]).map((g) => JSON.stringify(g['locality'])));
      assert.equal(
        statuses.has(unhealthy.address),
        grpcLocalities.has(JSON.stringify({ region: 'r2', zone: 'z1', sub_zone: 's1' })),
      );
      for (const g of forEnvoy['endpoints'] as Obj[]) {
        const parked = (g['lb_endpoints'] as Obj[]).some((e) => e['health_status'] !== undefined);
        if (parked)
          assert.equal(Number(g['priority'] ?? 0), lastRoutable + 1, 'parked endpoints come after the last priority');
      }
      const before = claShares(forGrpc);
      const after = claShares(forEnvoy);
      assert.ok(after.priorities.every((p) => !p.panic));
      for (const [key, share] of before.shares)
        assert.ok(Math.abs((after.shares.get(key) ?? -1) - share) < 1e-9, `${key}: ${share}`);
      for (const [key, share] of after.shares)
        if (!before.shares.has(key)) assert.equal(share, 0, `${key} gets no new traffic`);
      const total = [...after.shares.values()].reduce((a, b) => a + b, 0);
      assert.ok(Math.abs(total - 1) < 1e-9, `shares add up to 1, got ${total}`);
    });
  }
});
