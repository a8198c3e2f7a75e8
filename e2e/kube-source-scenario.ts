/**
 * Kubernetes as the source, against a real kube-apiserver on a real etcd
 * (e2e/support/kube-apiserver.ts): the test writes Nodes in three zones, a
 * Service and its EndpointSlices, and real proxyless gRPC clients
 * (@grpc/grpc-js-xds) in each zone call real backends through Canopy.
 * Canopy reaches the API server through a TCP proxy the test can cut.
 *
 * The API server refuses loopback addresses in EndpointSlices, so this runs
 * in a network namespace of its own (e2e/kube-source.test.ts starts it there)
 * whose loopback interface also holds 10.244.0.0/16: the backends listen on
 * 10.244.41.x, and nothing leaves the namespace.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { CoreV1Api, CustomObjectsApi, DiscoveryV1Api, KubeConfig, type V1EndpointSlice } from '@kubernetes/client-node';
import { pino } from 'pino';
import { startBackend, type Backend } from '../server/src/demo/backend.js';
import { xdsBootstrap } from '../server/src/demo/bootstrap.js';
import { formatTally, XdsEchoClient, type Tally } from '../server/src/demo/xds-client.js';
import { startCanopy, type Canopy } from '../server/src/main.js';
import { freePort } from './support/etcd-process.js';
import { kubeSkip, startKubeApiserver, type KubeApiserver } from './support/kube-apiserver.js';
import { DESTINATION_RULE, installCrd } from './support/kube-crds.js';
import { RawAdsStream } from './support/raw-ads.js';
import { decodeEnvoy } from './support/raw-grpc-frames.js';
import { startTcpProxy, type TcpProxy } from './support/tcp-proxy.js';

const EDS = 'type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment';
const ZONES = ['z-a', 'z-b', 'z-c'] as const;
const NS = 'default';

const onlyAndAll = (ids: string[]) => (t: Tally) =>
  t.failures === 0 && [...t.byBackend.keys()].every((id) => ids.includes(id)) && ids.every((id) => t.byBackend.has(id));

type Conditions = { ready: boolean; serving?: boolean; terminating?: boolean };

describe('Kubernetes source against a real API server', { skip: kubeSkip() }, () => {
  let api: KubeApiserver;
  let proxy: TcpProxy;
  let canopy: Canopy;
  let core: CoreV1Api;
  let discovery: DiscoveryV1Api;
  let custom: CustomObjectsApi;
  let port: number;
  const backends: Backend[] = [];
  const clients = new Map<string, XdsEchoClient>();

  /** Backend i: zone ZONES[i % 3], address 10.244.41.(i+1). */
  const slice = (name: string, conditions: (i: number) => Conditions): V1EndpointSlice => ({
    metadata: { name, namespace: NS, labels: { 'kubernetes.io/service-name': 'echo' } },
    addressType: 'IPv4',
    ports: [{ name: 'grpc', port, protocol: 'TCP' }],
    endpoints: backends.map((b, i) => ({
      addresses: [b.address],
      conditions: conditions(i),
      nodeName: `node-${ZONES[i % 3]}`,
      zone: ZONES[i % 3]!,
    })),
  });
  const putSlice = (s: V1EndpointSlice) =>
    discovery.replaceNamespacedEndpointSlice({ name: s.metadata!.name!, namespace: NS, body: s });
  const ids = (zone: string) => backends.filter((_, i) => ZONES[i % 3] === zone).map((b) => b.id);
  const client = (zone: string): XdsEchoClient => {
    let c = clients.get(zone);
    if (!c) {
      const bootstrap = xdsBootstrap({
        serverUri: canopy.xdsAddress,
        nodeId: `client-${zone}`,
        locality: { region: 'r1', zone, subzone: '' },
      });
      clients.set(zone, (c = new XdsEchoClient({ target: `xds:///echo.${NS}`, bootstrap })));
    }
    return c;
  };
  const readyz = async () => {
    const r = await fetch(`http://${canopy.adminAddress}/readyz`);
    return { status: r.status, body: (await r.json()) as { error?: { message: string } } };
  };
  const until = async <T>(what: string, f: () => Promise<T | undefined>, ms = 15_000): Promise<T> => {
    const deadline = Date.now() + ms;
    for (;;) {
      const v = await f();
      if (v !== undefined) return v;
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  };
  const writes = async (): Promise<Record<string, number>> => {
    const text = await (await fetch(`http://${canopy.adminAddress}/metrics`)).text();
    const out: Record<string, number> = {};
    for (const m of text.matchAll(/^canopy_kube_writes_total\{op="(\w+)"\} (\d+)/gm)) out[m[1]!] = Number(m[2]);
    return out;
  };
  const endpointsOf = async (name: string) => {
    const r = await fetch(`http://${canopy.adminAddress}/api/v1/services/${name}`);
    if (r.status !== 200) return undefined;
    return (await r.json()) as {
      vip?: string;
      protocol?: string;
      endpoints: { address: string; health: string; locality: { region: string; zone: string; subzone: string } }[];
    };
  };

  before(async () => {
    api = await startKubeApiserver();
    const kc = new KubeConfig();
    kc.loadFromFile(api.kubeconfig());
    core = kc.makeApiClient(CoreV1Api);
    discovery = kc.makeApiClient(DiscoveryV1Api);
    custom = kc.makeApiClient(CustomObjectsApi);
    await installCrd(api, DESTINATION_RULE);
    port = await freePort();
    for (let i = 0; i < 6; i++) {
      const zone = ZONES[i % 3]!;
      backends.push(
        await startBackend({
          id: `b${i}-${zone}`,
          host: `10.244.41.${i + 1}`,
          port,
          locality: { region: 'r1', zone, subzone: 's1' },
        }),
      );
    }
    for (const zone of ZONES) {
      await core.createNode({
        body: {
          metadata: {
            name: `node-${zone}`,
            labels: {
              'topology.kubernetes.io/region': 'r1',
              'topology.kubernetes.io/zone': zone,
              'topology.istio.io/subzone': 's1',
            },
          },
        },
      });
    }
    await core.createNamespacedService({
      namespace: NS,
      body: {
        metadata: { name: 'echo' },
        spec: { ports: [{ name: 'grpc', port: 50051, appProtocol: 'grpc' }], trafficDistribution: 'PreferSameZone' },
      },
    });
    await discovery.createNamespacedEndpointSlice({ namespace: NS, body: slice('echo-1', () => ({ ready: true })) });
    proxy = await startTcpProxy({ host: '127.0.0.1', port: api.port });
    canopy = await startCanopy({
      config: { services: [], server: {} },
      host: '127.0.0.1',
      xdsPort: 0,
      adminPort: 0,
      debounceMs: 20,
      logger: pino({ level: process.env['CANOPY_TEST_LOG'] ?? 'silent' }),
      kube: {
        kubeconfig: api.kubeconfig('admin', { server: `https://${proxy.address}` }),
        unreachableMs: 1000,
        maxBackoffMs: 500,
      },
    });
    await until('readiness after the first sync', async () => ((await readyz()).status === 200 ? true : undefined));
  });

  after(async () => {
    for (const c of clients.values()) c.close();
    await canopy?.stop();
    await proxy?.close();
    await Promise.all(backends.map((b) => b.stop()));
    await api?.destroy();
  });

  it('maps the Service, its slice and the Nodes: each client gets its own zone', async () => {
    const svc = await core.readNamespacedService({ name: 'echo', namespace: NS });
    const held = await endpointsOf(`echo.${NS}`);
    assert.ok(held);
    assert.equal(held.vip, svc.spec?.clusterIP);
    assert.equal(held.protocol, 'grpc');
    assert.deepEqual(
      held.endpoints.map((e) => `${e.address} ${e.locality.region}/${e.locality.zone}/${e.locality.subzone}`).sort(),
      backends.map((b, i) => `${b.address} r1/${ZONES[i % 3]}/s1`).sort(),
    );
    for (const zone of ZONES) {
      await client(zone).waitUntil(onlyAndAll(ids(zone)));
      const t = await client(zone).tally(30);
      assert.ok(onlyAndAll(ids(zone))(t), `${zone}: ${formatTally(t)}`);
    }
  });

  it('a readiness flip in the slice fails the zone over, and back', async () => {
    await putSlice(slice('echo-1', (i) => ({ ready: ZONES[i % 3] !== 'z-a' })));
    await client('z-a').waitUntil(onlyAndAll([...ids('z-b'), ...ids('z-c')]));
    assert.ok(onlyAndAll(ids('z-b'))(await client('z-b').tally(20)), 'the other zones are not disturbed');
    await putSlice(slice('echo-1', () => ({ ready: true })));
    await client('z-a').waitUntil(onlyAndAll(ids('z-a')));
  });

  it('terminating endpoints drain, and serve when every endpoint is terminating', async () => {
    const terminating = { ready: false, serving: true, terminating: true };
    await putSlice(slice('echo-1', (i) => (ZONES[i % 3] === 'z-a' ? terminating : { ready: true })));
    await client('z-a').waitUntil(onlyAndAll([...ids('z-b'), ...ids('z-c')]));
    const held = await endpointsOf(`echo.${NS}`);
    assert.deepEqual(
      held?.endpoints
        .filter((e) => e.health === 'terminating')
        .map((e) => e.address)
        .sort(),
      backends
        .filter((_, i) => ZONES[i % 3] === 'z-a')
        .map((b) => b.address)
        .sort(),
    );
    // Kubernetes' fallback: with no ready endpoint left, the serving terminating ones take traffic.
    await putSlice(slice('echo-1', () => terminating));
    await client('z-a').waitUntil(onlyAndAll(ids('z-a')));
    await putSlice(slice('echo-1', () => ({ ready: true })));
    await client('z-b').waitUntil(onlyAndAll(ids('z-b')));
  });

  it('scaling a slice from 10 to 1,000 endpoints arrives in one push', async () => {
    await core.createNamespacedService({
      namespace: NS,
      body: { metadata: { name: 'big' }, spec: { ports: [{ name: 'http', port: 80 }] } },
    });
    const bigSlice = (n: number): V1EndpointSlice => ({
      metadata: { name: 'big-1', namespace: NS, labels: { 'kubernetes.io/service-name': 'big' } },
      addressType: 'IPv4',
      ports: [{ name: 'http', port: 8080 }],
      endpoints: Array.from({ length: n }, (_, i) => ({
        addresses: [`10.1.${i >> 8}.${i & 255}`],
        conditions: { ready: true },
        nodeName: `node-${ZONES[i % 3]}`,
      })),
    });
    await discovery.createNamespacedEndpointSlice({ namespace: NS, body: bigSlice(10) });
    await until('big.default with 10 endpoints', async () =>
      (await endpointsOf(`big.${NS}`))?.endpoints.length === 10 ? true : undefined,
    );
    const ads = new RawAdsStream(canopy.xdsAddress);
    try {
      const node = { id: 'raw-big', cluster: 'test', locality: { region: 'r1', zone: 'z-a', sub_zone: '' } };
      ads.send({ node, type_url: EDS, resource_names: [`big.${NS}`] });
      const first = await ads.next();
      assert.equal(countEndpoints(first.resources[0]!.value), 10);
      ads.send({
        type_url: EDS,
        version_info: first.version_info,
        response_nonce: first.nonce,
        resource_names: [`big.${NS}`],
      });
      const before = await writes();
      await discovery.replaceNamespacedEndpointSlice({ name: 'big-1', namespace: NS, body: bigSlice(1000) });
      const pushed = await ads.next(10_000);
      assert.equal(countEndpoints(pushed.resources[0]!.value), 1000, 'the first push after the change holds all 1,000');
      ads.send({
        type_url: EDS,
        version_info: pushed.version_info,
        response_nonce: pushed.nonce,
        resource_names: [`big.${NS}`],
      });
      assert.equal(await ads.maybeNext(500), undefined, 'and no second push follows');
      const after = await writes();
      assert.equal((after['patch'] ?? 0) - (before['patch'] ?? 0), 1, 'one store write');
    } finally {
      ads.close();
    }
  });

  it('an Istio DestinationRule on the Service is read live: its distribute moves z-a clients to z-b', async () => {
    const rule = {
      apiVersion: 'networking.istio.io/v1',
      kind: 'DestinationRule',
      metadata: { name: 'echo-rule', namespace: NS },
      spec: {
        host: `echo.${NS}.svc.cluster.local`,
        trafficPolicy: {
          loadBalancer: {
            localityLbSetting: { enabled: true, distribute: [{ from: 'r1/z-a/*', to: { 'r1/z-b/*': 100 } }] },
          },
        },
      },
    };
    const dr = { group: 'networking.istio.io', version: 'v1', namespace: NS, plural: 'destinationrules' };
    await custom.createNamespacedCustomObject({ ...dr, body: rule });
    await client('z-a').waitUntil(onlyAndAll(ids('z-b')));
    // Istio's reading: without outlierDetection the rule ranks nothing, so a client it does not name gets every zone.
    await client('z-c').waitUntil(onlyAndAll(backends.map((b) => b.id)), { sample: 40 });
    await custom.deleteNamespacedCustomObject({ ...dr, name: 'echo-rule' });
    await client('z-a').waitUntil(onlyAndAll(ids('z-a')));
    await client('z-c').waitUntil(onlyAndAll(ids('z-c')));
  });

  it('an unreachable API server fails /readyz; what changed meanwhile arrives when it is back', async () => {
    const before = await writes();
    proxy.cut();
    const down = await until('503 from /readyz', async () => {
      const r = await readyz();
      return r.status === 503 ? r : undefined;
    });
    assert.match(down.body.error?.message ?? '', /API server has not answered/);
    // Changed while Canopy cannot see the API server; clients keep being served the last state meanwhile.
    await putSlice(slice('echo-1', (i) => ({ ready: ZONES[i % 3] !== 'z-c' })));
    assert.ok(onlyAndAll(ids('z-c'))(await client('z-c').tally(20)));
    proxy.heal();
    await until('ready again', async () => ((await readyz()).status === 200 ? true : undefined));
    await client('z-c').waitUntil(onlyAndAll([...ids('z-a'), ...ids('z-b')]));
    const after = await writes();
    assert.equal((after['patch'] ?? 0) - (before['patch'] ?? 0), 1, 'the missed change, written once');
    assert.equal(after['put'], before['put']);
  });

  it('the API server restarted mid-watch: nothing lost, nothing applied twice', async () => {
    const before = await writes();
    await api.stop();
    await until('503 from /readyz', async () => ((await readyz()).status === 503 ? true : undefined));
    await api.restart();
    await until('ready again', async () => ((await readyz()).status === 200 ? true : undefined));
    // The resumed watch replays nothing already written.
    await new Promise((r) => setTimeout(r, 500));
    const resumed = await writes();
    assert.deepEqual({ ...resumed, unchanged: 0 }, { ...before, unchanged: 0 }, 'no store write from the resync');
    await putSlice(slice('echo-1', () => ({ ready: true })));
    await client('z-c').waitUntil(onlyAndAll(ids('z-c')));
    const after = await writes();
    assert.equal((after['patch'] ?? 0) - (resumed['patch'] ?? 0), 1);
  });
});

function countEndpoints(bytes: Buffer): number {
  const cla = decodeEnvoy<{ endpoints: { lb_endpoints: unknown[] }[] }>(
    'envoy.config.endpoint.v3.ClusterLoadAssignment',
    bytes,
  );
  return cla.endpoints.reduce((n, l) => n + l.lb_endpoints.length, 0);
}
