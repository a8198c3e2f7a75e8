/**
 * The PGV walker and the listener invariants reject what Envoy would reject
 * and pass what it accepts. Each bad message differs from a good one in one
 * field, and the error must name that field's path.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { envoyType } from './support/envoy-protos.js';
import { decodeListener, listenerInvariants } from './support/listener-invariants.js';
import { pgvCheckBytes, type PgvError } from './support/pgv.js';

const T = {
  listener: 'envoy.config.listener.v3.Listener',
  route: 'envoy.config.route.v3.RouteConfiguration',
  cluster: 'envoy.config.cluster.v3.Cluster',
  cla: 'envoy.config.endpoint.v3.ClusterLoadAssignment',
  hcm: 'envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager',
  router: 'envoy.extensions.filters.http.router.v3.Router',
  tcp: 'envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy',
};

/** Encodes a fixture; `loose` lets through values protobufjs's verify refuses (an undefined enum number). */
function encode(type: string, value: object, loose = false): Uint8Array {
  const t = envoyType(type);
  const m = t.fromObject(value);
  const err = loose ? null : t.verify(m);
  if (err) throw new Error(`fixture is not a ${type}: ${err}`);
  return t.encode(m).finish();
}

function any(type: string, value: object) {
  return { type_url: `type.googleapis.com/${type}`, value: encode(type, value) };
}

const router = { name: 'envoy.filters.http.router', typed_config: any(T.router, {}) };
const rds = { config_source: { ads: {}, resource_api_version: 'V3' }, route_config_name: 'echo' };
const hcm = (over: object = {}) => any(T.hcm, { stat_prefix: 'echo', rds, http_filters: [router], ...over });

const goodCluster = {
  name: 'echo',
  type: 'EDS',
  eds_cluster_config: { eds_config: { ads: {}, resource_api_version: 'V3' } },
  connect_timeout: { seconds: 1 },
  lb_policy: 'ROUND_ROBIN',
};
const goodCla = {
  cluster_name: 'echo',
  endpoints: [
    {
      locality: { region: 'r' },
      load_balancing_weight: { value: 3 },
      lb_endpoints: [{ endpoint: { address: { socket_address: { address: '127.0.0.1', port_value: 5 } } } }],
    },
  ],
};
const goodRoute = {
  name: 'echo',
  virtual_hosts: [{ name: 'echo', domains: ['*'], routes: [{ match: { prefix: '' }, route: { cluster: 'echo' } }] }],
};
const tcpListener = (name: string, port: number, filters: object[]) => ({
  name,
  address: { socket_address: { address: '127.0.0.1', port_value: port } },
  filter_chains: [{ filters }],
});

function paths(errors: readonly PgvError[]): string[] {
  return errors.map((e) => e.path);
}

describe('PGV walker', () => {
  it('passes well-formed resources of every type', () => {
    assert.deepEqual(pgvCheckBytes(T.cluster, encode(T.cluster, goodCluster)), []);
    assert.deepEqual(pgvCheckBytes(T.cla, encode(T.cla, goodCla)), []);
    assert.deepEqual(pgvCheckBytes(T.route, encode(T.route, goodRoute)), []);
    const api = { name: 'echo', api_listener: { api_listener: hcm() } };
    assert.deepEqual(pgvCheckBytes(T.listener, encode(T.listener, api)), []);
  });

  const bad: [string, string, object, string][] = [
    ['Duration gt {} (connect_timeout 0)', T.cluster, { ...goodCluster, connect_timeout: {} }, 'connect_timeout'],
    ['enum defined_only', T.cluster, { ...goodCluster, lb_policy: 77 }, 'lb_policy'],
    ['string min_len', T.cluster, { ...goodCluster, name: '' }, 'name'],
    [
      'repeated min_items',
      T.route,
      { name: 'r', virtual_hosts: [{ name: 'v', domains: [] }] },
      'virtual_hosts[0].domains',
    ],
    [
      'UInt32Value wrapper gte 1',
      T.cla,
      { ...goodCla, endpoints: [{ ...goodCla.endpoints[0], load_balancing_weight: { value: 0 } }] },
      'endpoints[0].load_balancing_weight.value',
    ],
    [
      'uint32 lte on a port',
      T.cla,
      {
        cluster_name: 'c',
        endpoints: [
          { lb_endpoints: [{ endpoint: { address: { socket_address: { address: 'a', port_value: 70000 } } } }] },
        ],
      },
      'endpoints[0].lb_endpoints[0].endpoint.address.socket_address.port_value',
    ],
    [
      'required message',
      T.route,
      { name: 'r', virtual_hosts: [{ name: 'v', domains: ['*'], routes: [{ route: { cluster: 'c' } }] }] },
      'virtual_hosts[0].routes[0].match',
    ],
    [
      'oneof required inside an Any',
      T.listener,
      { name: 'l', api_listener: { api_listener: any(T.hcm, { stat_prefix: 's', http_filters: [router] }) } },
      'api_listener.api_listener.route_specifier',
    ],
    [
      'string min_len inside an Any',
      T.listener,
      { name: 'l', api_listener: { api_listener: hcm({ stat_prefix: '' }) } },
      'api_listener.api_listener.stat_prefix',
    ],
    [
      'well-known regex (header name)',
      T.route,
      { ...goodRoute, request_headers_to_remove: ['bad\nheader'] },
      'request_headers_to_remove[0]',
    ],
    [
      'string pattern',
      T.route,
      {
        name: 'r',
        virtual_hosts: [
          { name: 'v', domains: ['*'], routes: [{ match: { path_separated_prefix: '/a/' }, route: { cluster: 'c' } }] },
        ],
      },
      'virtual_hosts[0].routes[0].match.path_separated_prefix',
    ],
  ];
  for (const [what, type, message, path] of bad) {
    it(`rejects ${what} at ${path}`, () => {
      const errors = pgvCheckBytes(type, encode(type, message, true));
      assert.ok(paths(errors).includes(path), `expected an error at ${path}, got ${JSON.stringify(errors)}`);
    });
  }

  it('rejects an Any whose type it cannot check', () => {
    const l = {
      name: 'l',
      api_listener: { api_listener: { type_url: 'type.googleapis.com/no.such.Type', value: new Uint8Array() } },
    };
    assert.deepEqual(paths(pgvCheckBytes(T.listener, encode(T.listener, l))), ['api_listener.api_listener']);
  });

  it('reports bytes that do not decode', () => {
    const errors = pgvCheckBytes(T.cluster, Uint8Array.of(0x0a, 0x05, 0x41));
    assert.equal(errors.length, 1);
    assert.match(errors[0]!.message, /does not decode/);
  });
});

describe('listener invariants', () => {
  const tcp = { name: 'envoy.filters.network.tcp_proxy', typed_config: any(T.tcp, { stat_prefix: 's', cluster: 'c' }) };
  const http = { name: 'envoy.filters.network.http_connection_manager', typed_config: hcm() };
  const check = (...ls: object[]) => listenerInvariants(ls.map((l) => decodeListener(encode(T.listener, l))));

  it('passes distinct listeners with terminal filters and the router last', () => {
    assert.deepEqual(check(tcpListener('a', 1, [tcp]), tcpListener('b', 2, [http])), []);
  });

  it('rejects a duplicate name and a duplicate address', () => {
    assert.deepEqual(paths(check(tcpListener('a', 1, [tcp]), tcpListener('a', 2, [tcp]))), ['listeners[1].name']);
    assert.deepEqual(paths(check(tcpListener('a', 1, [tcp]), tcpListener('b', 1, [tcp]))), ['listeners[1].address']);
  });

  it('rejects two default filter chains', () => {
    const l = { ...tcpListener('a', 1, [tcp]), filter_chains: [{ filters: [tcp] }, { filters: [tcp] }] };
    assert.deepEqual(paths(check(l)), ['listeners[0].filter_chains[1].filter_chain_match']);
  });

  it('rejects a router that is not last, and a chain without a router', () => {
    const other = { name: 'x', typed_config: any(T.router, {}) };
    const early = {
      name: 'h',
      typed_config: hcm({
        http_filters: [router, { ...other, typed_config: any(T.tcp, { stat_prefix: 's', cluster: 'c' }) }],
      }),
    };
    assert.deepEqual(paths(check(tcpListener('a', 1, [early]))), [
      'listeners[0].filter_chains[0].filters[0].typed_config.http_filters[0]',
      'listeners[0].filter_chains[0].filters[0].typed_config.http_filters[1]',
    ]);
    const none = { name: 'h', typed_config: hcm({ http_filters: [] }) };
    assert.deepEqual(paths(check(tcpListener('a', 1, [none]))), [
      'listeners[0].filter_chains[0].filters[0].typed_config.http_filters',
    ]);
  });

  it('rejects a terminal filter that is not last', () => {
    assert.deepEqual(paths(check(tcpListener('a', 1, [tcp, http]))), ['listeners[0].filter_chains[0].filters[0]']);
  });
});
