/**
 * Listeners and routes a stock Envoy sidecar can use, over real ADS against a
 * spawned `canopy serve`. A node with a stock bootstrap (user_agent_name
 * envoy, no Canopy metadata) on SotW and on delta, and one that asks for
 * local binds (`canopy.outbound_address`), fetch LDS by wildcard and RDS for
 * what the listeners name; the update goes through Envoy's listener-manager
 * rules (server/test/support/envoy-listener-manager.ts names the source of
 * each): nothing bound off the host, no address twice, and every service
 * reachable the way captured traffic reaches it (original destination →
 * listener → filter chain → virtual host by authority → cluster). Routes
 * carry the configured timeout, 0 (disabled) by default. Every resource
 * passes the PGV walker and the listener invariants. And a config whose
 * services a sidecar could not tell apart is refused at load, with the path.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { dump as stringify } from 'js-yaml';
import { envoyType } from '../server/test/support/envoy-protos.js';
import { applyLds, filterChainFor, handOff, virtualHostFor } from '../server/test/support/envoy-listener-manager.js';
import { listenerInvariants } from '../server/test/support/listener-invariants.js';
import { pgvCheckBytes } from '../server/test/support/pgv.js';
import { startCanopyProcess, type CanopyProcess } from './support/canopy-process.js';
import { RawAdsStream, RawDeltaStream, type RawDeltaResponse } from './support/raw-ads.js';

type Obj = Record<string, unknown>;
const CLI = fileURLToPath(new URL('../server/src/cli/canopy.js', import.meta.url));
const T = 'type.googleapis.com/envoy.config';
const LDS = `${T}.listener.v3.Listener`;
const RDS = `${T}.route.v3.RouteConfiguration`;
const HCM = 'envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager';

const ep = (address: string, port: number) => ({
  address,
  port,
  locality: { region: 'r1', zone: 'z1', subzone: 's1' },
});

/** Two gRPC/HTTP services on one port, two TCP services on another, one without a VIP, one with route settings. */
const SERVICES = [
  { name: 'echo', port: 50051, vip: '10.96.0.10', protocol: 'grpc', endpoints: [ep('127.0.31.1', 50051)] },
  { name: 'greet', port: 50051, vip: '10.96.0.11', protocol: 'http', endpoints: [ep('127.0.31.2', 50051)] },
  {
    name: 'db',
    port: 5432,
    vip: '10.96.0.20',
    protocol: 'tcp',
    outboundPort: 15432,
    endpoints: [ep('127.0.31.3', 5432)],
  },
  {
    name: 'cache',
    port: 5432,
    vip: '10.96.0.21',
    protocol: 'tcp',
    outboundPort: 15433,
    endpoints: [ep('127.0.31.4', 5432)],
  },
  { name: 'novip', port: 9090, protocol: 'grpc', endpoints: [ep('127.0.31.5', 9090)] },
  {
    name: 'slow',
    port: 8080,
    vip: '10.96.0.30',
    protocol: 'http',
    timeoutMs: 30_000,
    idleTimeoutMs: 0,
    retries: { attempts: 3, retryOn: ['connect-failure', '5xx'], perTryTimeoutMs: 2500 },
    endpoints: [ep('127.0.31.6', 8080)],
  },
];

function decode(typeUrl: string, value: Uint8Array): Obj {
  assert.deepEqual(pgvCheckBytes(typeUrl, value), [], typeUrl);
  const t = envoyType(typeUrl.slice(typeUrl.lastIndexOf('/') + 1));
  return t.toObject(t.decode(value), { enums: String, longs: Number, arrays: true }) as Obj;
}

function unpack(any: Obj): Obj {
  return decode(`type.googleapis.com/${String(any['type_url']).split('/').pop()}`, any['value'] as Uint8Array);
}

function node(id: string, metadata: Record<string, string> = {}): Obj {
  const fields = Object.fromEntries(Object.entries(metadata).map(([k, v]) => [k, { stringValue: v }]));
  return {
    id,
    locality: { region: 'r1', zone: 'z1', sub_zone: 's1' },
    user_agent_name: 'envoy',
    ...(Object.keys(fields).length ? { metadata: { fields } } : {}),
  };
}

interface Fetched {
  listeners: Obj[];
  routes: Map<string, Obj>;
}

/** LDS by wildcard, then RDS for the route configurations the listeners name, ACKing each. */
async function fetchSotw(address: string, n: Obj): Promise<Fetched> {
  const s = new RawAdsStream(address);
  try {
    s.send({ node: n, type_url: LDS, resource_names: [] });
    const lds = await s.next(10_000);
    s.send({ type_url: LDS, resource_names: [], version_info: lds.version_info, response_nonce: lds.nonce });
    const listeners = lds.resources.map((a) => decode(LDS, a.value));
    const names = routeNames(listeners);
    s.send({ type_url: RDS, resource_names: names });
    const rds = await s.next(10_000);
    s.send({ type_url: RDS, resource_names: names, version_info: rds.version_info, response_nonce: rds.nonce });
    const routes = new Map(rds.resources.map((a) => decode(RDS, a.value)).map((r) => [String(r['name']), r]));
    return { listeners, routes };
  } finally {
    s.close();
  }
}

async function fetchDelta(address: string, n: Obj): Promise<Fetched> {
  const s = new RawDeltaStream(address);
  try {
    s.send({ node: n, type_url: LDS, resource_names_subscribe: [] });
    const lds = await s.next(10_000);
    s.send({ type_url: LDS, response_nonce: lds.nonce });
    const listeners = lds.resources.map((a) => decode(LDS, a.resource!.value));
    s.send({ type_url: RDS, resource_names_subscribe: routeNames(listeners) });
    const rds = await s.next(10_000);
    s.send({ type_url: RDS, response_nonce: rds.nonce });
    const routes = new Map(rds.resources.map((a) => decode(RDS, a.resource!.value)).map((r) => [String(r['name']), r]));
    return { listeners, routes };
  } finally {
    s.close();
  }
}

function hcmOf(chain: Obj): Obj | undefined {
  const f = ((chain['filters'] as Obj[] | undefined) ?? []).at(-1);
  const typed = f?.['typed_config'] as Obj | undefined;
  return typed && String(typed['type_url']).endsWith(HCM) ? unpack(typed) : undefined;
}

function routeNames(listeners: readonly Obj[]): string[] {
  const out = new Set<string>();
  for (const l of listeners)
    for (const c of (l['filter_chains'] as Obj[] | undefined) ?? []) {
      const hcm = hcmOf(c);
      if (hcm) out.add(String((hcm['rds'] as Obj)['route_config_name']));
    }
  return [...out].sort();
}

/** Where a connection to `dst` with this authority ends: the cluster, and the route that sent it there. */
function follow(
  f: Fetched,
  listener: Obj | undefined,
  dst: string,
  authority: string,
): { cluster?: string; route?: Obj; listener?: string } {
  if (!listener) return {};
  const chain = filterChainFor(listener, dst);
  if (!chain) return { listener: String(listener['name']) };
  const hcm = hcmOf(chain);
  if (!hcm) {
    const tcp = unpack(((chain['filters'] as Obj[]).at(-1) as Obj)['typed_config'] as Obj);
    return { cluster: String(tcp['cluster']), listener: String(listener['name']) };
  }
  const rc = f.routes.get(String((hcm['rds'] as Obj)['route_config_name']));
  assert.ok(rc, 'the route configuration the listener names was sent');
  const vh = virtualHostFor(rc, authority);
  const route = ((vh?.['routes'] as Obj[] | undefined) ?? [])[0]?.['route'] as Obj | undefined;
  return route ? { cluster: String(route['cluster']), route, listener: String(listener['name']) } : {};
}

describe('listeners and routes a stock Envoy sidecar can use', () => {
  let canopy: CanopyProcess;
  let address: string;

  before(async () => {
    canopy = await startCanopyProcess({ server: { debounceMs: 20 }, services: SERVICES });
    address = canopy.xdsUri.replace(/^.*:\/\//, '');
  });
  after(async () => {
    await canopy?.stop();
  });

  for (const [protocol, fetchAll] of [
    ['SotW', fetchSotw],
    ['delta', fetchDelta],
  ] as const) {
    it(`${protocol}: a stock bootstrap gets the transparent-capture shape, which Envoy's listener manager accepts`, async () => {
      const f = await fetchAll(address, node(`stock-${protocol}`));
      assert.deepEqual(listenerInvariants(f.listeners), []);
      const verdict = applyLds(f.listeners);
      assert.deepEqual(verdict.errors, [], 'binds nothing off the host and repeats no address');
      const virtual = f.listeners.filter((l) => (l['use_original_dst'] as Obj | undefined)?.['value'] === true);
      assert.equal(virtual.length, 1, 'one virtual outbound listener');
      assert.deepEqual((virtual[0]!['address'] as Obj)['socket_address'], { address: '0.0.0.0', port_value: 15001 });
      for (const l of f.listeners)
        if (l !== virtual[0])
          assert.deepEqual(l['bind_to_port'], { value: false }, `${String(l['name'])} is not bound`);
      // Captured traffic: each service by its VIP (or, without one, any address) and the authorities clients use.
      for (const s of SERVICES) {
        const dst = s.vip ?? '10.1.2.3';
        const listener = handOff(f.listeners, { address: dst, port: s.port });
        const authorities =
          s.protocol === 'tcp' ? [''] : [s.name, `${s.name}:${s.port}`, ...(s.vip ? [`${s.vip}:${s.port}`] : [])];
        for (const authority of authorities) {
          const to = follow(f, listener, dst, authority);
          assert.equal(to.cluster, s.name, `${s.name} via ${dst}:${s.port} "${authority}" (listener ${to.listener})`);
        }
      }
      // Two HTTP services on one port: one listener, one route configuration, a virtual host each.
      const shared = f.listeners.filter(
        (l) => ((l['address'] as Obj)['socket_address'] as Obj)['port_value'] === 50051,
      );
      assert.equal(shared.length, 1);
      const rc = f.routes.get(routeNames(shared)[0]!)!;
      assert.deepEqual(
        (rc['virtual_hosts'] as Obj[]).map((v) => v['name']),
        ['echo', 'greet'],
      );
      assert.equal(virtualHostFor(rc, 'unknown:50051'), undefined, 'no catch-all when the port is shared');
    });
  }

  it('routes carry the configured timeout, idle timeout and retries, and 0 (disabled) by default', async () => {
    const f = await fetchSotw(address, node('stock-routes'));
    const echo = follow(f, handOff(f.listeners, { address: '10.96.0.10', port: 50051 }), '10.96.0.10', 'echo').route!;
    assert.deepEqual(echo['timeout'], {}, "a present 0 s timeout: disabled, not Envoy's 15 s");
    assert.equal(echo['idle_timeout'], undefined);
    assert.equal(echo['retry_policy'], undefined);
    assert.deepEqual(
      echo['max_stream_duration'],
      { grpc_timeout_header_max: {} },
      'gRPC: the grpc-timeout header bounds a call',
    );
    const slow = follow(f, handOff(f.listeners, { address: '10.96.0.30', port: 8080 }), '10.96.0.30', 'slow').route!;
    assert.deepEqual(slow['timeout'], { seconds: 30 });
    assert.deepEqual(slow['idle_timeout'], {});
    const retry = slow['retry_policy'] as Obj;
    assert.equal(retry['retry_on'], 'connect-failure,5xx');
    assert.deepEqual(retry['num_retries'], { value: 3 });
    assert.deepEqual(retry['per_try_timeout'], { seconds: 2, nanos: 500_000_000 });
  });

  it('a bootstrap that asks for local binds gets them, shared ports merged, no address twice', async () => {
    const f = await fetchDelta(address, node('local-1', { 'canopy.outbound_address': '127.0.0.1' }));
    assert.deepEqual(listenerInvariants(f.listeners), []);
    assert.deepEqual(applyLds(f.listeners).errors, []);
    const at = (port: number) =>
      f.listeners.find((l) => ((l['address'] as Obj)['socket_address'] as Obj)['port_value'] === port);
    assert.equal(
      f.listeners.some((l) => l['use_original_dst'] !== undefined),
      false,
      'no virtual listener without capture',
    );
    for (const s of SERVICES) {
      const port = s.outboundPort ?? s.port;
      const listener = at(port);
      assert.deepEqual((listener?.['address'] as Obj)['socket_address'], { address: '127.0.0.1', port_value: port });
      const authority = s.protocol === 'tcp' ? '' : `${s.name}:${s.port}`;
      assert.equal(follow(f, listener, '127.0.0.1', authority).cluster, s.name, s.name);
    }
  });

  it('the admin API refuses a service a sidecar could not tell apart from another, with the field path', async () => {
    const put = await canopy.admin('PUT', '/api/v1/services/echo-twin', {
      port: 50051,
      vip: '10.96.0.10',
      endpoints: [],
    });
    assert.equal(put.status, 400);
    assert.match(JSON.stringify(put.body), /"path":"vip".*10\.96\.0\.10:50051 is also service \\"echo\\"'s/);
    const tcp = await canopy.admin('PUT', '/api/v1/services/raw', { port: 9090, protocol: 'tcp', endpoints: [] });
    assert.equal(tcp.status, 400, 'a tcp service without a vip on a port an HTTP service has');
    const ok = await canopy.admin('PUT', '/api/v1/services/other', { port: 50051, vip: '10.96.0.12', endpoints: [] });
    assert.equal(ok.status, 201, 'a third gRPC service on the shared port joins its listener');
    await canopy.admin('DELETE', '/api/v1/services/other');
  });

  it('a service joining a port merges the listeners over delta, and the update stays acceptable', async () => {
    const s = new RawDeltaStream(address);
    try {
      s.send({ node: node('joiner'), type_url: LDS, resource_names_subscribe: [] });
      const held = new Map<string, Obj>();
      const apply = (r: RawDeltaResponse) => {
        for (const name of r.removed_resources) held.delete(name);
        for (const a of r.resources) held.set(a.name, decode(LDS, a.resource!.value));
      };
      const first = await s.next(10_000);
      apply(first);
      s.send({ type_url: LDS, response_nonce: first.nonce });
      assert.ok(held.has('slow'), 'slow alone on 8080 has its own listener');
      const put = await canopy.admin('PUT', '/api/v1/services/fast', {
        port: 8080,
        vip: '10.96.0.31',
        protocol: 'http',
        endpoints: [ep('127.0.31.7', 8080)],
      });
      assert.equal(put.status, 201);
      const next = await s.next(10_000);
      apply(next);
      s.send({ type_url: LDS, response_nonce: next.nonce });
      assert.deepEqual(next.removed_resources, ['slow']);
      assert.ok(held.has('outbound|0.0.0.0:8080'), 'one listener for slow and fast');
      assert.deepEqual(applyLds([...held.values()]).errors, []);
      assert.equal((await canopy.admin('DELETE', '/api/v1/services/fast')).status, 204);
      const back = await s.next(10_000);
      apply(back);
      s.send({ type_url: LDS, response_nonce: back.nonce });
      assert.ok(held.has('slow') && !held.has('outbound|0.0.0.0:8080'), 'slow has its own listener again');
    } finally {
      s.close();
    }
  });

  it('what Envoy would refuse (the same address twice, a bind off the host) is told apart from what it accepts', () => {
    const l = (name: string, address: string, port: number, bind = true): Obj => ({
      name,
      address: { socket_address: { address, port_value: port } },
      ...(bind ? {} : { bind_to_port: { value: false } }),
    });
    assert.equal(applyLds([l('a', '127.0.0.1', 80), l('b', '127.0.0.1', 80)]).accepted, false);
    // NACKed, yet what Envoy could add stays (a real Envoy 1.40 in e2e/envoy-rules.test.ts).
    assert.deepEqual(applyLds([l('a', '127.0.0.1', 80), l('b', '127.0.0.1', 80), l('c', '127.0.0.1', 81)]).applied, [
      'a',
      'c',
    ]);
    assert.equal(applyLds([l('a', '10.96.0.10', 80)]).accepted, false);
    assert.equal(applyLds([l('a', '10.96.0.10', 80, false), l('b', '0.0.0.0', 80)]).accepted, true);
  });

  it('canopy serve refuses a config whose services a sidecar could not tell apart, with the field paths', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-listeners-'));
    try {
      const file = path.join(dir, 'mesh.yaml');
      const bad = [
        { name: 'a', port: 80, vip: '10.0.0.1', protocol: 'http', endpoints: [] },
        { name: 'b', port: 80, vip: '10.0.0.1', protocol: 'http', endpoints: [] },
        { name: 'c', port: 5432, protocol: 'tcp', endpoints: [] },
        { name: 'd', port: 5432, protocol: 'tcp', vip: '10.0.0.4', outboundPort: 5432, endpoints: [] },
        { name: 'e', port: 80, vip: '10.0.0.5', protocol: 'tcp', outboundPort: 80, endpoints: [] },
      ];
      writeFileSync(file, stringify({ services: bad }));
      const r = spawnSync(
        process.execPath,
        [CLI, 'serve', '--config', file, '--data-dir', path.join(dir, 'data'), '--xds-port', '0', '--admin-port', '0'],
        { encoding: 'utf8', timeout: 20_000 },
      );
      assert.notEqual(r.status, 0, 'refused');
      const out = `${r.stdout}\n${r.stderr}`;
      assert.match(out, /services\[1\]\.vip: 10\.0\.0\.1:80 is also service "a"'s/);
      assert.match(out, /services\[3\]\.outboundPort: local outbound port 5432 is also service "c"'s/);
      assert.match(out, /services\[4\]\.outboundPort: local outbound port 80 is also service "a"'s/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
