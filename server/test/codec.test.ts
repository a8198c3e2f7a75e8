/**
 * The codec against two independent readers: protobufjs with Envoy's real
 * protos (field for field), and grpc-js-xds's own resource validators — the
 * strictest peer we ship against, which NACKs what Envoy would reject.
 */
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { describe, it } from 'node:test';
import { buildCla, type Cla } from '../src/domain/cla.js';
import { EMPTY_LOCALITY } from '../src/domain/locality.js';
import { Mesh } from '../src/domain/mesh.js';
import { planFor } from '../src/domain/priorities.js';
import type { Endpoint } from '../src/domain/service.js';
import { encodeCluster } from '../src/resources/cluster.js';
import { encodeCla, lbEndpointEncodeCount } from '../src/resources/endpoint/endpoint-codec.js';
import { encodeListener } from '../src/resources/listener.js';
import { encodeRouteConfiguration } from '../src/resources/route.js';
import { encodeAny, encodeDiscoveryResponse } from '../src/wire/envelope.js';
import { decodeDiscoveryRequest } from '../src/wire/request.js';
import { messageType } from '../src/wire/protos.js';
import { CLUSTER_TYPE, ENDPOINT_TYPE, LISTENER_TYPE, ROUTE_TYPE, type XdsTypeUrl } from '../src/resources/type-urls.js';
import { client, ep, lb, service } from './support/builders.js';

// ------------------------------------------------------------------ helpers

/** protobufjs decode → plain JSON (proto field names, no defaults, bytes as base64); T names what a test reads. */
function decode<T = Record<string, unknown>>(fullName: string, bytes: Uint8Array): T {
  const type = messageType(fullName);
  return JSON.parse(JSON.stringify(type.toObject(type.decode(bytes), { enums: String, longs: Number }))) as T;
}

interface AnyJson {
  readonly type_url: string;
  readonly value: string;
}

function encode(fullName: string, value: object): Uint8Array {
  const T = messageType(fullName);
  return T.encode(T.fromObject(value)).finish();
}

function claOf(endpoints: Endpoint[]): Cla {
  return {
    clusterName: 'echo',
    overprovisioningFactor: 140,
    groups: [
      {
        locality: { region: 'r1', zone: 'z1', subzone: '' },
        priority: 0,
        weight: endpoints.reduce((s, e) => s + e.weight, 0),
        endpoints,
      },
      {
        locality: { region: 'r2', zone: '', subzone: 's' },
        priority: 1,
        weight: 1,
        endpoints: [ep({ address: '10.9.9.9' })],
      },
    ],
  };
}

/** A CLA built the way the server builds it: a mesh, a tree, a client's plan. */
function meshCla(): Cla {
  const mesh = new Mesh();
  const eps = [
    ep({ locality: 'r1/z1/s1' }),
    ep({ locality: 'r1/z1/s1', weight: 3 }),
    ep({ locality: 'r1/z1/s2', address: 'fd00::7', port: 50051 }),
    ep({ locality: 'r1/z2/s1' }),
    ep({ locality: 'r2/z1/s1', weight: 2 }),
  ];
  mesh.put(service('svc', eps, lb('failover')));
  const s = mesh.get('svc');
  assert.ok(s);
  return buildCla(
    'svc',
    s.tree,
    s.spec.loadBalancing,
    planFor(s.tree, s.spec.loadBalancing, client({ locality: 'r1/z1/s1' })),
  );
}

// grpc-js-xds is CommonJS with no exports map: its validators are reachable by path.
interface PeerResult {
  readonly name: string;
  readonly value?: unknown;
  readonly error?: string;
}
interface PeerVirtualHost {
  readonly routes: readonly { readonly route?: { readonly cluster: string } }[];
}
interface PeerResourceType {
  decode(context: unknown, resource: { type_url: string; value: Buffer }): PeerResult;
}
interface Peer {
  readonly types: Record<XdsTypeUrl, PeerResourceType>;
  readonly context: unknown;
  readonly bootstrap: unknown;
  findVirtualHostForDomain(vhosts: readonly PeerVirtualHost[], domain: string): PeerVirtualHost | null;
  getListenerResourceName(bootstrap: unknown, target: unknown): string;
  parseUri(uri: string): unknown;
}

let peerCache: Peer | undefined;

function peer(): Peer {
  if (peerCache) return peerCache;
  const require = createRequire(import.meta.url);
  const at = (file: string) => require(`@grpc/grpc-js-xds/build/src/${file}`);
  // What a proxyless client does first; without it the router filter is unknown and every Listener is NACKed.
  require('@grpc/grpc-js-xds').register();
  const bootstrap = at('xds-bootstrap.js').validateBootstrapConfig({
    xds_servers: [{ server_uri: 'localhost:1', channel_creds: [{ type: 'insecure' }], server_features: ['xds_v3'] }],
    node: { id: 'codec-test', locality: {} },
  });
  const dir = 'xds-resource-type/';
  peerCache = {
    types: {
      [LISTENER_TYPE]: at(`${dir}listener-resource-type.js`).ListenerResourceType.get(),
      [ROUTE_TYPE]: at(`${dir}route-config-resource-type.js`).RouteConfigurationResourceType.get(),
      [CLUSTER_TYPE]: at(`${dir}cluster-resource-type.js`).ClusterResourceType.get(),
      [ENDPOINT_TYPE]: at(`${dir}endpoint-resource-type.js`).EndpointResourceType.get(),
    },
    context: { server: bootstrap.xdsServers[0], bootstrap },
    bootstrap,
    findVirtualHostForDomain: at('xds-dependency-manager.js').findVirtualHostForDomain,
    getListenerResourceName: at('resolver-xds.js').getListenerResourceName,
    parseUri: require('@grpc/grpc-js/build/src/uri-parser.js').parseUri,
  };
  return peerCache;
}

function peerDecode(typeUrl: XdsTypeUrl, bytes: Uint8Array): PeerResult {
  const p = peer();
  return p.types[typeUrl].decode(p.context, { type_url: typeUrl, value: Buffer.from(bytes) });
}

/** The peer's parsed value; T names the parts a test reads. */
function accepted<T>(typeUrl: XdsTypeUrl, bytes: Uint8Array): T {
  const r = peerDecode(typeUrl, bytes);
  assert.equal(r.error, undefined, `grpc-js-xds NACKs it: ${r.error}`);
  return r.value as T;
}

// -------------------------------------------------------------------- tests

describe('resources decode with Envoy’s protos', () => {
  it('ClusterLoadAssignment, field for field', () => {
    const cla = claOf([ep({ address: '10.0.0.1', port: 8080 }), ep({ address: 'fd00::1', port: 9090, weight: 5 })]);
    assert.deepEqual(decode('envoy.config.endpoint.v3.ClusterLoadAssignment', encodeCla(cla)), {
      cluster_name: 'echo',
      endpoints: [
        {
          locality: { region: 'r1', zone: 'z1' },
          lb_endpoints: [
            { endpoint: { address: { socket_address: { address: '10.0.0.1', port_value: 8080 } } } },
            {
              endpoint: { address: { socket_address: { address: 'fd00::1', port_value: 9090 } } },
              load_balancing_weight: { value: 5 },
            },
          ],
          load_balancing_weight: { value: 6 },
        },
        {
          locality: { region: 'r2', sub_zone: 's' },
          lb_endpoints: [{ endpoint: { address: { socket_address: { address: '10.9.9.9', port_value: 8080 } } } }],
          load_balancing_weight: { value: 1 },
          priority: 1,
        },
      ],
      policy: { overprovisioning_factor: { value: 140 } },
    });
  });

  it('Listener: an API listener whose HttpConnectionManager fetches routes over ADS, router filter last', () => {
    const l = decode<{ name: string; api_listener: { api_listener: AnyJson } }>(
      'envoy.config.listener.v3.Listener',
      encodeListener('echo', 'echo-routes'),
    );
    assert.equal(l.name, 'echo');
    const any = l.api_listener.api_listener;
    assert.equal(
      any.type_url,
      'type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager',
    );
    const hcm = decode<{ stat_prefix: string; rds: unknown; http_filters: { name: string; typed_config: AnyJson }[] }>(
      'envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager',
      Buffer.from(any.value, 'base64'),
    );
    assert.equal(hcm.stat_prefix, 'echo');
    assert.deepEqual(hcm.rds, {
      config_source: { ads: {}, resource_api_version: 'V3' },
      route_config_name: 'echo-routes',
    });
    const filters = hcm.http_filters;
    assert.equal(filters.at(-1)?.name, 'envoy.filters.http.router');
    assert.equal(
      filters.at(-1)?.typed_config.type_url,
      'type.googleapis.com/envoy.extensions.filters.http.router.v3.Router',
    );
  });

  it('RouteConfiguration: one virtual host, every path to the cluster', () => {
    const r = decode(
      'envoy.config.route.v3.RouteConfiguration',
      encodeRouteConfiguration('echo', ['echo', 'echo:8080', '*'], 'echo-c'),
    );
    assert.deepEqual(r, {
      name: 'echo',
      virtual_hosts: [
        {
          name: 'echo',
          domains: ['echo', 'echo:8080', '*'],
          routes: [{ match: { prefix: '' }, route: { cluster: 'echo-c' } }],
        },
      ],
    });
  });

  it('Cluster: EDS over ADS, round robin, 1s connect timeout', () => {
    const c = decode('envoy.config.cluster.v3.Cluster', encodeCluster('echo', 'echo-eds'));
    assert.deepEqual(c, {
      name: 'echo',
      type: 'EDS',
      eds_cluster_config: { eds_config: { ads: {}, resource_api_version: 'V3' }, service_name: 'echo-eds' },
      lb_policy: 'ROUND_ROBIN',
      connect_timeout: { seconds: 1 },
    });
  });
});

describe('grpc-js-xds, our strict peer', () => {
  it('accepts our Listener, RouteConfiguration and Cluster, and resolves xds:///echo through them', () => {
    const p = peer();
    const listenerName = p.getListenerResourceName(p.bootstrap, p.parseUri('xds:///echo'));
    assert.equal(listenerName, 'echo');
    const listener = accepted<{ name: string }>(LISTENER_TYPE, encodeListener(listenerName, 'echo'));
    assert.equal(listener.name, 'echo');

    const routes = accepted<{ virtual_hosts: PeerVirtualHost[] }>(
      ROUTE_TYPE,
      encodeRouteConfiguration('echo', ['echo', 'echo:8080', '*'], 'echo'),
    );
    // The client matches virtual hosts against the target's path: "echo" for xds:///echo.
    for (const authority of ['echo', 'echo:8080', 'other']) {
      assert.equal(
        p.findVirtualHostForDomain(routes.virtual_hosts, authority)?.routes[0]?.route?.cluster,
        'echo',
        authority,
      );
    }

    const cluster = accepted<{ type: string; edsServiceName: string; lbPolicyConfig: unknown }>(
      CLUSTER_TYPE,
      encodeCluster('echo', 'echo'),
    );
    assert.equal(cluster.type, 'EDS');
    assert.equal(cluster.edsServiceName, 'echo');
    assert.deepEqual(cluster.lbPolicyConfig, [{ xds_wrr_locality: { child_policy: [{ round_robin: {} }] } }]);
  });

  it('accepts our ClusterLoadAssignments: several priorities, IPv6, weights, an empty locality', () => {
    const fromMesh = meshCla();
    assert.ok(new Set(fromMesh.groups.map((g) => g.priority)).size > 1, 'the fixture spans priorities');
    const empty: Cla = {
      clusterName: 'flat',
      overprovisioningFactor: 100,
      groups: [{ locality: EMPTY_LOCALITY, priority: 0, weight: 1, endpoints: [ep()] }],
    };
    for (const cla of [fromMesh, empty, claOf([ep(), ep({ weight: 7 })])]) {
      const got = accepted<{
        cluster_name: string;
        endpoints: { locality: object | null; load_balancing_weight: { value: number } | null }[];
      }>(ENDPOINT_TYPE, encodeCla(cla));
      assert.equal(got.cluster_name, cla.clusterName);
      assert.equal(got.endpoints.length, cla.groups.length);
      // gRPC silently drops a locality without a weight, so every group must carry one.
      for (const g of got.endpoints) assert.ok(g.locality && (g.load_balancing_weight?.value ?? 0) >= 1);
    }
  });

  const lbe = (address: string) => ({ endpoint: { address: { socket_address: { address, port_value: 80 } } } });
  const bad: { name: string; cla: object; error: string }[] = [
    {
      name: 'a priority gap',
      cla: {
        endpoints: [
          { locality: { region: 'a' }, lb_endpoints: [lbe('10.0.0.1')], load_balancing_weight: { value: 1 } },
          {
            locality: { region: 'b' },
            lb_endpoints: [lbe('10.0.0.2')],
            load_balancing_weight: { value: 1 },
            priority: 2,
          },
        ],
      },
      error: 'Endpoints have priority 2 but not 1',
    },
    {
      name: 'a locality that is not set',
      cla: { endpoints: [{ lb_endpoints: [lbe('10.0.0.1')], load_balancing_weight: { value: 1 } }] },
      error: 'endpoints[0].locality unset',
    },
    {
      name: 'one address twice',
      cla: {
        endpoints: [
          { locality: { region: 'a' }, lb_endpoints: [lbe('10.0.0.1')], load_balancing_weight: { value: 1 } },
          { locality: { region: 'b' }, lb_endpoints: [lbe('10.0.0.1')], load_balancing_weight: { value: 1 } },
        ],
      },
      error: 'endpoints[1].lb_endpoints[0].endpoint: address is a duplicate',
    },
    {
      name: 'a host name instead of an IP',
      cla: { endpoints: [{ locality: {}, lb_endpoints: [lbe('echo.local')], load_balancing_weight: { value: 1 } }] },
      error: 'not a valid IPv4 or IPv6 address',
    },
  ];
  for (const { name, cla, error } of bad) {
    it(`NACKs a ClusterLoadAssignment with ${name} (the validator path is live)`, () => {
      const bytes = encode('envoy.config.endpoint.v3.ClusterLoadAssignment', { cluster_name: 'bad', ...cla });
      const r = peerDecode(ENDPOINT_TYPE, bytes);
      assert.equal(r.value, undefined);
      assert.match(r.error ?? '', new RegExp(error.replace(/[[\].]/g, '\\$&')));
    });
  }
});

describe('CLA encoding cost', () => {
  const oneGroup = (addresses: readonly string[]): number =>
    encodeCla({
      clusterName: 'echo',
      overprovisioningFactor: 140,
      groups: [
        {
          locality: { region: 'r', zone: 'z', subzone: 's' },
          priority: 0,
          weight: 1000,
          endpoints: addresses.map((address) => ep({ address, port: 8080 })),
        },
      ],
    }).length;

  // Envoy's nesting (LbEndpoint > Endpoint > Address > SocketAddress) costs 13 bytes
  // around the address text for a 2-byte port: no encoding of strings can go lower.
  const cases: { name: string; address: (i: number) => string; maxPerEndpoint: number }[] = [
    {
      name: 'seven-character IPv4',
      address: (i) => `1.${Math.floor(i / 100)}.${Math.floor(i / 10) % 10}.${i % 10}`,
      maxPerEndpoint: 20,
    },
    {
      name: 'typical 10.0.x.y IPv4',
      address: (i) => `10.0.${i >> 8}.${i & 255}`,
      maxPerEndpoint: 13 + '10.0.3.231'.length,
    },
  ];
  for (const { name, address, maxPerEndpoint } of cases) {
    it(`1,000 ${name} endpoints cost at most ${maxPerEndpoint} bytes each`, () => {
      const addresses = Array.from({ length: 1000 }, (_, i) => address(i));
      assert.equal(new Set(addresses).size, 1000);
      // The group's length prefix widens from 1 to 3 bytes: envelope, not per-endpoint cost.
      const perEndpoint = (oneGroup(addresses) - oneGroup([]) - 2) / 1000;
      assert.ok(perEndpoint <= maxPerEndpoint, `${perEndpoint} bytes per endpoint`);
    });
  }

  it('adds exactly 13 bytes plus the address text per endpoint', () => {
    const base = Array.from({ length: 100 }, (_, i) => `10.1.0.${i}`);
    for (const extra of ['10.2.0.1', '192.168.100.200']) {
      assert.equal(oneGroup([...base, extra]) - oneGroup(base), 13 + extra.length, extra);
    }
  });

  it('re-encodes only the endpoint that changed', () => {
    const endpoints = Array.from({ length: 50 }, () => ep());
    encodeCla(claOf(endpoints));
    const before = lbEndpointEncodeCount();
    const changed = [...endpoints];
    changed[7] = { ...(endpoints[7] as Endpoint), weight: 9 };
    encodeCla(claOf(changed));
    assert.equal(
      lbEndpointEncodeCount() - before,
      2,
      'the changed endpoint and the group-2 endpoint built fresh by claOf',
    );
  });

  it('encodes whole tree leaves (runs) to exactly the bytes of the endpoints one by one', () => {
    const cla = meshCla();
    assert.ok(
      cla.groups.every((g) => g.runs && g.runs.length > 0),
      'region/zone/subzone trees group by leaf',
    );
    const flat: Cla = { ...cla, groups: cla.groups.map(({ runs: _runs, ...g }) => g) };
    assert.deepEqual(Buffer.from(encodeCla(cla)), Buffer.from(encodeCla(flat)));
  });
});

describe('discovery envelopes', () => {
  it('assembles a DiscoveryResponse around pre-encoded resources', () => {
    const a = encodeCla(claOf([ep()]));
    const b = encodeCla({ ...claOf([ep()]), clusterName: 'other' });
    const bytes = encodeDiscoveryResponse({
      versionInfo: 'v1',
      typeUrl: ENDPOINT_TYPE,
      nonce: '7',
      resources: [encodeAny(ENDPOINT_TYPE, a), encodeAny(ENDPOINT_TYPE, b)],
    });
    const r = decode<{ version_info: string; nonce: string; type_url: string; resources: AnyJson[] }>(
      'envoy.service.discovery.v3.DiscoveryResponse',
      bytes,
    );
    assert.equal(r.version_info, 'v1');
    assert.equal(r.nonce, '7');
    assert.equal(r.type_url, ENDPOINT_TYPE);
    const resources = r.resources;
    assert.deepEqual(
      resources.map((x) => x.type_url),
      [ENDPOINT_TYPE, ENDPOINT_TYPE],
    );
    assert.deepEqual(Buffer.from(resources[0]?.value ?? '', 'base64'), Buffer.from(a));
    assert.deepEqual(Buffer.from(resources[1]?.value ?? '', 'base64'), Buffer.from(b));
  });

  it('assembles an empty DiscoveryResponse (every resource removed)', () => {
    const r = decode(
      'envoy.service.discovery.v3.DiscoveryResponse',
      encodeDiscoveryResponse({ versionInfo: '', typeUrl: CLUSTER_TYPE, nonce: '1', resources: [] }),
    );
    assert.deepEqual(r, { type_url: CLUSTER_TYPE, nonce: '1' });
  });

  it('decodes a DiscoveryRequest with node locality, metadata and error detail', () => {
    const bytes = encode('envoy.service.discovery.v3.DiscoveryRequest', {
      version_info: 'v0',
      node: {
        id: 'n1',
        cluster: 'c',
        locality: { region: 'r', zone: 'z', sub_zone: 's' },
        metadata: {
          fields: {
            network: { stringValue: 'net1' },
            port: { numberValue: 8080 },
            labels: { structValue: { fields: { app: { stringValue: 'x' } } } },
            tags: { listValue: { values: [{ boolValue: true }, { nullValue: 0 }] } },
          },
        },
        user_agent_name: 'grpc-node-js',
      },
      resource_names: ['a', 'b'],
      type_url: ENDPOINT_TYPE,
      response_nonce: '3',
      error_detail: { code: 3, message: 'nope' },
    });
    assert.deepEqual(decodeDiscoveryRequest(bytes), {
      versionInfo: 'v0',
      node: {
        id: 'n1',
        cluster: 'c',
        locality: { region: 'r', zone: 'z', subzone: 's' },
        metadata: { network: 'net1', port: 8080, labels: { app: 'x' }, tags: [true, null] },
        userAgentName: 'grpc-node-js',
      },
      resourceNames: ['a', 'b'],
      typeUrl: ENDPOINT_TYPE,
      responseNonce: '3',
      errorDetail: { code: 3, message: 'nope' },
    });
  });

  it('decodes a bare ACK without inventing a node or an error', () => {
    const r = decodeDiscoveryRequest(
      encode('envoy.service.discovery.v3.DiscoveryRequest', { type_url: LISTENER_TYPE, response_nonce: '2' }),
    );
    assert.deepEqual(r, { versionInfo: '', resourceNames: [], typeUrl: LISTENER_TYPE, responseNonce: '2' });
  });
});
