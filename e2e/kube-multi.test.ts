/**
 * Several clusters, one mesh (issue 42), the way users run it: three real
 * kube-apiservers (each its own etcd), listed in a clusters file given to two
 * `canopy serve --kube-clusters FILE` replicas on one etcd store. The Service
 * `web` in `default` exists in all three and is one Canopy service whose
 * endpoints are the union, each tagged with its cluster and network (east and
 * west on network n1 by the file, north on n2 by Istio's network label on its
 * EndpointSlice). Its `routingPreference: [network, cluster]` places them for
 * a real Envoy in n1/east (east, then west, then north) and for a grpc-js ADS
 * client in n2/north (north, then the rest). One API server is stopped and
 * started again: its endpoints stay, the status and metrics say it is stale
 * and since when, and the others' changes go on flowing. A cluster removed
 * from the file takes its endpoints away and leaves the others untouched;
 * added back, they return. Nothing dials the endpoints, so no network
 * namespace.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { CoreV1Api, DiscoveryV1Api, KubeConfig, type V1EndpointSlice } from '@kubernetes/client-node';
import { dump } from 'js-yaml';
import { envoyType } from '../server/test/support/envoy-protos.js';
import { runCanopyCli } from './support/canopy-cli.js';
import { startCanopyProcess, type CanopyProcess } from './support/canopy-process.js';
import { EnvoyProcess, envoySkip, explainFailure } from './support/envoy-process.js';
import { etcdSkip, startEtcd, type EtcdProcess } from './support/etcd-process.js';
import { kubeSkip, startKubeApiserver, type KubeApiserver } from './support/kube-apiserver.js';
import { RawAdsStream } from './support/raw-ads.js';
import { until } from './support/until.js';

const NS = 'default';
const EDS = 'type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment';
const CLUSTERS = ['east', 'west', 'north'] as const;
type Name = (typeof CLUSTERS)[number];
/** Each cluster's endpoint addresses (none is dialled). */
const ADDRESS: Readonly<Record<Name, string>> = { east: '10.244.1.1', west: '10.244.2.1', north: '10.244.3.1' };
const LB = JSON.stringify({ mode: 'failover', routingPreference: ['network', 'cluster'] });

interface Cluster {
  readonly api: KubeApiserver;
  readonly discovery: DiscoveryV1Api;
}

describe('several Kubernetes clusters, one mesh', { skip: kubeSkip() || envoySkip() || etcdSkip() }, () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-multi-'));
  const file = path.join(dir, 'clusters.yaml');
  const clusters = new Map<Name, Cluster>();
  const replicas: CanopyProcess[] = [];
  let etcd: EtcdProcess;
  let envoy: EnvoyProcess;
  let ads: RawAdsStream | undefined;

  const writeClusters = (names: readonly Name[]) =>
    writeFileSync(
      file,
      dump({
        clusters: names.map((n) => ({
          name: n,
          ...(n === 'north' ? {} : { network: 'n1' }),
          kubeconfig: clusters.get(n)!.api.kubeconfig(),
        })),
      }),
    );
  const slice = (c: Name, addresses: readonly string[]): V1EndpointSlice => ({
    metadata: {
      name: `web-${c}`,
      namespace: NS,
      labels: {
        'kubernetes.io/service-name': 'web',
        ...(c === 'north' ? { 'topology.istio.io/network': 'n2' } : {}),
      },
    },
    addressType: 'IPv4',
    ports: [{ name: 'http', port: 8080 }],
    endpoints: addresses.map((a) => ({ addresses: [a], conditions: { ready: true }, nodeName: `node-${c}` })),
  });
  /** web.default's endpoints as a replica serves them: `address cluster network`, sorted. */
  const served = async (c: CanopyProcess): Promise<string[]> => {
    const r = await c.admin('GET', `/api/v1/services/web.${NS}`);
    const body = r.body as { endpoints?: { address: string; cluster?: string; network?: string }[] } | undefined;
    return (body?.endpoints ?? []).map((e) => `${e.address} ${e.cluster ?? ''} ${e.network ?? ''}`).sort();
  };
  const row = (c: Name, address = ADDRESS[c]) => `${address} ${c} ${c === 'north' ? 'n2' : 'n1'}`;
  const servesExactly = (rows: readonly string[], cs: readonly CanopyProcess[] = replicas) =>
    until(`every replica serving ${rows.join(', ')}`, async () => {
      for (const c of cs) if ((await served(c)).join(',') !== [...rows].sort().join(',')) return undefined;
      return true;
    });
  const status = async (c: CanopyProcess, name: Name) => {
    const r = await c.admin('GET', '/api/v1/clusters');
    const list = (r.body as { clusters: { name: string; connected: boolean; synced: boolean; staleSince?: string }[] })
      .clusters;
    return list.find((x) => x.name === name);
  };
  const metric = async (c: CanopyProcess, line: RegExp): Promise<number | undefined> => {
    const text = (await c.admin('GET', '/metrics')).body as string;
    const m = line.exec(text);
    return m ? Number(m[1]) : undefined;
  };
  /** host → priority as the Envoy holds web.default. */
  const envoyPriorities = async (): Promise<string> => {
    const c = (await envoy.clusters()).find((x) => x.name === `web.${NS}`);
    return (c?.hosts ?? [])
      .map((h) => `${h.address.replace(/:\d+$/, '')}@${h.priority}`)
      .sort()
      .join(' ');
  };
  const envoyHolds = (want: string) =>
    explainFailure(
      () => [envoy],
      () => envoy.until(async () => (await envoyPriorities()) === want, 20_000, `Envoy holding ${want}`),
    );

  before(async () => {
    const started = await Promise.all(CLUSTERS.map(() => startKubeApiserver()));
    for (const [i, name] of CLUSTERS.entries()) {
      const api = started[i]!;
      const kc = new KubeConfig();
      kc.loadFromFile(api.kubeconfig());
      const core = kc.makeApiClient(CoreV1Api);
      const discovery = kc.makeApiClient(DiscoveryV1Api);
      const labels = { 'topology.kubernetes.io/region': 'r1', 'topology.kubernetes.io/zone': `z-${name}` };
      await core.createNode({ body: { metadata: { name: `node-${name}`, labels } } });
      await core.createNamespacedService({
        namespace: NS,
        body: {
          metadata: { name: 'web', annotations: { 'canopy.dev/load-balancing': LB } },
          spec: { ports: [{ name: 'http', port: 8080 }] },
        },
      });
      await discovery.createNamespacedEndpointSlice({ namespace: NS, body: slice(name, [ADDRESS[name]]) });
      clusters.set(name, { api, discovery });
    }
    writeClusters(CLUSTERS);
    etcd = await startEtcd();
    const args = ['--store', `etcd://${etcd.endpoint}/canopy-multi/`, '--kube-clusters', file];
    args.push('--kube-unreachable-ms', '1000', '--debounce-ms', '20');
    replicas.push(
      ...(await Promise.all([startCanopyProcess({ services: [] }, args), startCanopyProcess({ services: [] }, args)])),
    );
    for (const c of replicas)
      await until('ready', async () => ((await c.admin('GET', '/readyz')).status === 200 ? true : undefined), 60_000);
    envoy = await EnvoyProcess.start({
      xds: replicas[0]!.xdsUri,
      nodeId: 'envoy-east',
      locality: { region: 'r1', zone: 'z-east' },
      outboundAddress: '127.0.63.1',
      metadata: { network: 'n1', cluster: 'east' },
    });
  });

  after(async () => {
    ads?.close();
    await envoy?.stop();
    await Promise.all(replicas.map((c) => c.stop()));
    await etcd?.destroy();
    await Promise.all([...clusters.values()].map((c) => c.api.destroy()));
    rmSync(dir, { recursive: true, force: true });
  });

  it("one Service in three clusters is one service: the union, each endpoint with its cluster's scopes", async () => {
    await servesExactly(CLUSTERS.map((c) => row(c)));
    for (const c of replicas) {
      const list = ((await c.admin('GET', '/api/v1/clusters')).body as { clusters: { name: string }[] }).clusters;
      assert.deepEqual(list.map((x) => x.name).sort(), [...CLUSTERS].sort());
      assert.equal(await metric(c, /^canopy_kube_cluster_synced\{cluster="north"\} (\d+)/m), 1);
    }
  });

  it('placed by network, then cluster: for an Envoy in n1/east, and a grpc-js client in n2/north', async () => {
    await envoyHolds(`${ADDRESS.east}@0 ${ADDRESS.west}@1 ${ADDRESS.north}@2`);
    ads = new RawAdsStream(replicas[1]!.xdsUri);
    const s = (v: string) => ({ stringValue: v });
    const node = {
      id: 'grpc-north',
      locality: { region: 'r1', zone: 'z-north' },
      metadata: { fields: { network: s('n2'), cluster: s('north') } },
    };
    ads.send({ node, type_url: EDS, resource_names: [`web.${NS}`] });
    const r = await ads.next(10_000);
    const type = envoyType('envoy.config.endpoint.v3.ClusterLoadAssignment');
    const cla = type.toObject(type.decode(r.resources[0]!.value), { defaults: true }) as {
      endpoints: {
        priority: number;
        lb_endpoints: { endpoint: { address: { socket_address: { address: string } } } }[];
      }[];
    };
    const placed = cla.endpoints
      .flatMap((g) => g.lb_endpoints.map((e) => `${e.endpoint.address.socket_address.address}@${g.priority}`))
      .sort()
      .join(' ');
    assert.equal(placed, `${ADDRESS.east}@1 ${ADDRESS.west}@1 ${ADDRESS.north}@0`);
  });

  it('two replicas share the work: a change in one cluster is written once between them', async () => {
    const writes = async () => {
      let n = 0;
      for (const c of replicas)
        for (const op of ['put', 'patch'])
          n += (await metric(c, new RegExp(`^canopy_kube_writes_total\\{op="${op}"\\} (\\d+)`, 'm'))) ?? 0;
      return n;
    };
    const before = await writes();
    await clusters.get('north')!.discovery.replaceNamespacedEndpointSlice({
      name: 'web-north',
      namespace: NS,
      body: slice('north', ['10.244.3.2']),
    });
    await servesExactly([row('east'), row('west'), row('north', '10.244.3.2')]);
    await clusters.get('north')!.discovery.replaceNamespacedEndpointSlice({
      name: 'web-north',
      namespace: NS,
      body: slice('north', [ADDRESS.north]),
    });
    await servesExactly(CLUSTERS.map((c) => row(c)));
    // A replica's counter moves once its write returns, which may be after the other replica serves it.
    const counted = await until('both writes counted', async () => ((await writes()) - before >= 2 ? true : undefined));
    assert.ok(counted);
    assert.equal((await writes()) - before, 2, 'one write per change, between both replicas');
  });

  it("an API server down: its cluster's endpoints stay, the status says since when, the others go on", async () => {
    const west = clusters.get('west')!;
    await west.api.stop();
    const stale = await until('west stale', async () => {
      const s = await status(replicas[0]!, 'west');
      return s && !s.connected && s.staleSince ? s : undefined;
    });
    assert.ok(Date.parse(stale.staleSince!) <= Date.now());
    const ready = await until('/readyz naming west', async () => {
      const r = await replicas[0]!.admin('GET', '/readyz');
      return r.status === 503 ? JSON.stringify(r.body) : undefined;
    });
    assert.match(ready, /cluster west/);
    const cli = await runCanopyCli(['get', 'clusters', '--admin', replicas[0]!.adminUrl]);
    assert.equal(cli.code, 0, cli.stderr);
    assert.match(cli.stdout, /^west\s+n1\s+yes\s+stale since \d{4}-/m);
    assert.match(cli.stdout, /^east\s+n1\s+yes\s+connected\s+2\s+1\s/m);
    assert.ok((await metric(replicas[0]!, /^canopy_kube_cluster_stale_seconds\{cluster="west"\} ([\d.]+)/m))! > 0);
    assert.equal(await metric(replicas[0]!, /^canopy_kube_cluster_stale_seconds\{cluster="east"\} ([\d.]+)/m), 0);
    // East changes meanwhile: written, west's endpoint kept.
    await clusters.get('east')!.discovery.replaceNamespacedEndpointSlice({
      name: 'web-east',
      namespace: NS,
      body: slice('east', [ADDRESS.east, '10.244.1.2']),
    });
    await servesExactly([row('east'), row('east', '10.244.1.2'), row('west'), row('north')]);
    await west.api.restart();
    await until('west answers again', async () => ((await status(replicas[0]!, 'west'))?.connected ? true : undefined));
    await until('ready again', async () =>
      (await replicas[0]!.admin('GET', '/readyz')).status === 200 ? true : undefined,
    );
    await servesExactly([row('east'), row('east', '10.244.1.2'), row('west'), row('north')]);
  });

  it('a cluster removed from the file takes its endpoints away; added back, they return', async () => {
    writeClusters(['east', 'west']);
    await servesExactly([row('east'), row('east', '10.244.1.2'), row('west')]);
    await envoyHolds(`${ADDRESS.east}@0 10.244.1.2@0 ${ADDRESS.west}@1`);
    writeClusters(CLUSTERS);
    await servesExactly([row('east'), row('east', '10.244.1.2'), row('west'), row('north')]);
    await envoyHolds(`${ADDRESS.east}@0 10.244.1.2@0 ${ADDRESS.west}@1 ${ADDRESS.north}@2`);
  });
});
