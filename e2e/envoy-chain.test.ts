/**
 * The compose demo's topology as processes on loopback: Canopy with the
 * compose mesh, the three echo apps as real gRPC backends in three regions,
 * and, for each Envoy bootstrap in deploy/envoy, a raw ADS stream of the
 * bootstrap's api_type (delta for DELTA_GRPC) that presents its node the way
 * Envoy does (user_agent_name envoy, wildcard CDS and LDS, then EDS and RDS
 * for what they name, and on delta LEDS for the collections the CLA names). What each
 * sidecar would get must form a listener → route → cluster → endpoints chain
 * from its outbound port to its nearest app, pass the PGV walker and the
 * listener invariants. This test starts no Envoy: it checks what each would be sent (the
 * e2e/envoy-*.test.ts that start real Envoys check what one does with it).
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { load as parse } from 'js-yaml';
import { startBackend, type Backend } from '../server/src/demo/backend.js';
import { packagePath } from '../server/src/platform/paths.js';
import { envoyType } from '../server/test/support/envoy-protos.js';
import { listenerInvariants } from '../server/test/support/listener-invariants.js';
import { pgvCheckBytes } from '../server/test/support/pgv.js';
import { startCanopyProcess, type CanopyProcess } from './support/canopy-process.js';
import { RawAdsStream, RawDeltaStream, type RawResponse } from './support/raw-ads.js';

type Obj = Record<string, unknown>;
const T = 'type.googleapis.com/envoy.config';
const LDS = `${T}.listener.v3.Listener`;
const RDS = `${T}.route.v3.RouteConfiguration`;
const CDS = `${T}.cluster.v3.Cluster`;
const EDS = `${T}.endpoint.v3.ClusterLoadAssignment`;
const LEDS = `${T}.endpoint.v3.LbEndpoint`;

/** The apps of docker-compose.yml, on loopback instead of the compose network. */
const APPS: Record<string, string> = {
  '172.30.0.11': '127.0.21.11',
  '172.30.0.12': '127.0.21.12',
  '172.30.0.13': '127.0.21.13',
};

function decode(typeUrl: string, value: Uint8Array): Obj {
  assert.deepEqual(pgvCheckBytes(typeUrl, value), [], typeUrl);
  const t = envoyType(typeUrl.slice(typeUrl.lastIndexOf('/') + 1));
  return t.toObject(t.decode(value), { enums: String, longs: Number, arrays: true }) as Obj;
}

function unpack(any: Obj): Obj {
  return decode(String(any['type_url']), any['value'] as Uint8Array);
}

/** A bootstrap's node as Envoy sends it on ADS (Struct metadata, its user agent); proto-loader's Value fields are camelCase. */
function envoyNode(bootstrap: Obj): Obj {
  const node = bootstrap['node'] as Obj;
  const metadata = (node['metadata'] as Obj | undefined) ?? {};
  const fields = Object.fromEntries(Object.entries(metadata).map(([k, v]) => [k, { stringValue: String(v) }]));
  return { ...node, metadata: { fields }, user_agent_name: 'envoy' };
}

/** Envoy's two ADS protocols behind one fetch: subscribe (empty = wildcard), take the response, ACK it. */
type Fetch = (typeUrl: string, names: string[], first: boolean, node: Obj) => Promise<Obj[]>;

function deltaFetch(stream: RawDeltaStream): Fetch {
  return async (typeUrl, names, first, node) => {
    stream.send({ type_url: typeUrl, resource_names_subscribe: names, ...(first ? { node } : {}) });
    const r = await stream.next(10_000);
    assert.equal(r.type_url, typeUrl);
    stream.send({ type_url: typeUrl, response_nonce: r.nonce });
    return r.resources.map((a) => decode(typeUrl, a.resource!.value));
  };
}

async function sotwFetch(
  stream: RawAdsStream,
  typeUrl: string,
  names: string[],
  first: boolean,
  node: Obj,
): Promise<Obj[]> {
  stream.send({ type_url: typeUrl, resource_names: names, ...(first ? { node } : {}) });
  const r: RawResponse = await stream.next(10_000);
  assert.equal(r.type_url, typeUrl);
  stream.send({ type_url: typeUrl, resource_names: names, version_info: r.version_info, response_nonce: r.nonce });
  return r.resources.map((a) => decode(typeUrl, a.value));
}

describe('what each compose Envoy sidecar is sent', () => {
  let canopy: CanopyProcess;
  const backends: Backend[] = [];
  const byAddress = new Map<string, Backend>();

  before(async () => {
    const mesh = parse(readFileSync(packagePath('deploy', 'compose', 'mesh.yaml'), 'utf8')) as { services: Obj[] };
    const services = [];
    for (const s of mesh.services) {
      const endpoints = [];
      for (const e of s['endpoints'] as Obj[]) {
        const host = APPS[String(e['address'])]!;
        const locality = e['locality'] as { region: string; zone: string; subzone: string };
        const b = await startBackend({ id: host, host, locality });
        backends.push(b);
        byAddress.set(`${host}:${b.port}`, b);
        endpoints.push({ ...e, address: host, port: b.port });
      }
      services.push({ ...s, endpoints });
    }
    canopy = await startCanopyProcess({ server: { debounceMs: 20 }, services });
  });

  after(async () => {
    await canopy?.stop();
    await Promise.all(backends.map((b) => b.stop()));
  });

  const dir = packagePath('deploy', 'envoy');
  for (const file of readdirSync(dir).filter((f) => f.endsWith('.yaml'))) {
    it(`${file}: listener → route → cluster → endpoints, from 127.0.0.1:15001 to the nearest app`, async () => {
      const bootstrap = parse(readFileSync(`${dir}/${file}`, 'utf8')) as Obj;
      const node = envoyNode(bootstrap);
      const address = canopy.xdsUri.replace(/^.*:\/\//, '');
      const delta = ((bootstrap['dynamic_resources'] as Obj)['ads_config'] as Obj)['api_type'] === 'DELTA_GRPC';
      const stream = delta ? new RawDeltaStream(address) : new RawAdsStream(address);
      const fetchAll: Fetch =
        stream instanceof RawDeltaStream ? deltaFetch(stream) : (t, n, f, nd) => sotwFetch(stream, t, n, f, nd);
      try {
        const clusters = await fetchAll(CDS, [], true, node);
        const echoCluster = clusters.find((c) => c['name'] === 'echo');
        assert.ok(echoCluster, 'cluster echo');
        assert.ok((echoCluster['common_lb_config'] as Obj)['locality_weighted_lb_config'], 'locality weights honoured');
        assert.ok(echoCluster['typed_extension_protocol_options'], 'HTTP/2 to the gRPC backends');
        const edsName = String((echoCluster['eds_cluster_config'] as Obj)['service_name'] ?? 'echo');
        const [cla] = await fetchAll(EDS, [edsName], false, node);
        const listeners = await fetchAll(LDS, [], false, node);
        assert.deepEqual(listenerInvariants(listeners), []);
        const listener = listeners.find((l) => l['name'] === 'echo');
        assert.ok(listener, 'listener echo');
        assert.deepEqual((listener['address'] as Obj)['socket_address'], { address: '127.0.0.1', port_value: 15001 });
        const hcm = unpack(((listener['filter_chains'] as Obj[])[0]!['filters'] as Obj[])[0]!['typed_config'] as Obj);
        const routeName = String((hcm['rds'] as Obj)['route_config_name']);
        const [route] = await fetchAll(RDS, [routeName], false, node);
        const vh = ((route!['virtual_hosts'] as Obj[]) ?? []).find((v) => (v['domains'] as string[]).includes('*'));
        assert.ok(vh, 'a virtual host that matches any authority');
        const target = ((vh['routes'] as Obj[])[0]!['route'] as Obj)['cluster'];
        assert.equal(target, 'echo', 'the route goes to the echo cluster');
        // The nearest app: every priority-0 endpoint is in the sidecar's own region.
        const p0 = ((cla!['endpoints'] as Obj[]) ?? []).filter((g) => Number(g['priority'] ?? 0) === 0);
        const locality = (bootstrap['node'] as Obj)['locality'] as Obj;
        assert.ok(p0.length > 0);
        for (const g of p0) assert.equal((g['locality'] as Obj)['region'], locality['region']);
        // On delta the CLA names LEDS collections: the endpoints are their members.
        const leds = p0[0]!['leds_cluster_locality_config'] as Obj | undefined;
        assert.equal(leds !== undefined, delta, 'LEDS exactly when the bootstrap uses delta ADS');
        const lbEndpoints = leds
          ? await fetchAll(LEDS, [String(leds['leds_collection_name'])], false, node)
          : (p0[0]!['lb_endpoints'] as Obj[]);
        const sock = ((lbEndpoints[0]!['endpoint'] as Obj)['address'] as Obj)['socket_address'] as Obj;
        const backend = byAddress.get(`${String(sock['address'])}:${String(sock['port_value'])}`);
        assert.ok(backend, 'the endpoint is a running app');
      } finally {
        stream.close();
      }
    });
  }

  it('the sidecars NACKed nothing', async () => {
    const metrics = await fetch(`${canopy.adminUrl}/metrics`).then((r) => r.text());
    assert.doesNotMatch(metrics, /canopy_xds_nacks_total\{[^}]*\} [1-9]/);
  });
});
