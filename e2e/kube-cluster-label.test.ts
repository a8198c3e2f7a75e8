/**
 * Istio's `topology.istio.io/cluster` label, read as users run Canopy: one
 * real kube-apiserver whose Service `web` has three EndpointSlices, one
 * labelled cluster c1 (and network n1), one c2 (a slice another controller
 * mirrors in), one with no label. `canopy serve --kubeconfig FILE` names no
 * cluster, so each slice's label is its endpoints' `cluster` scope: the admin
 * API shows it, a grpc-js ADS client saying `CLUSTER_ID: c1` gets c1's
 * endpoint first under `routingPreference: [cluster]`, and a relabelled slice
 * moves its endpoint. A second Canopy on the same API server as the named
 * cluster `east` puts every endpoint in east, as istiod puts a workload in its
 * installation's cluster whatever label it carries; the network label still
 * wins there. Nothing dials the endpoints.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { envoyType } from '../server/test/support/envoy-protos.js';
import { startCanopyProcess, type CanopyProcess } from './support/canopy-process.js';
import { kubeSkip, startKubeApiserver, type KubeApiserver } from './support/kube-apiserver.js';
import { RawAdsStream } from './support/raw-ads.js';
import { until } from './support/until.js';

const EDS = 'type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment';
const SLICES = '/apis/discovery.k8s.io/v1/namespaces/default/endpointslices';
const CLUSTER = 'topology.istio.io/cluster';
const NETWORK = 'topology.istio.io/network';

const slice = (name: string, address: string, labels: Record<string, string>) => ({
  apiVersion: 'discovery.k8s.io/v1',
  kind: 'EndpointSlice',
  metadata: { name, labels: { 'kubernetes.io/service-name': 'web', ...labels } },
  addressType: 'IPv4',
  ports: [{ name: 'http', port: 8080 }],
  endpoints: [{ addresses: [address], conditions: { ready: true } }],
});

describe("Istio's cluster label on EndpointSlices", { skip: kubeSkip() }, () => {
  let api: KubeApiserver;
  let plain: CanopyProcess;
  let named: CanopyProcess;
  let ads: RawAdsStream | undefined;

  /** web.default's endpoints as Canopy serves them: `address cluster network`, sorted. */
  const served = async (c: CanopyProcess): Promise<string> => {
    const r = await c.admin('GET', '/api/v1/services/web.default');
    const body = r.body as { endpoints?: { address: string; cluster?: string; network?: string }[] } | undefined;
    return (body?.endpoints ?? [])
      .map((e) => `${e.address} ${e.cluster ?? ''} ${e.network ?? ''}`)
      .sort()
      .join(', ');
  };
  const serves = (c: CanopyProcess, want: string) =>
    until(`serving ${want}`, async () => ((await served(c)) === want ? true : undefined));

  before(async () => {
    api = await startKubeApiserver();
    const post = async (p: string, body: unknown) => {
      const r = await api.request('POST', p, body);
      assert.equal(r.status, 201, `POST ${p}: ${JSON.stringify(r.body)}`);
    };
    const lb = JSON.stringify({ mode: 'failover', routingPreference: ['cluster'] });
    await post('/api/v1/namespaces/default/services', {
      metadata: { name: 'web', annotations: { 'canopy.dev/load-balancing': lb } },
      spec: { ports: [{ name: 'http', port: 8080 }] },
    });
    await post(SLICES, slice('web-c1', '10.252.1.1', { [CLUSTER]: 'c1', [NETWORK]: 'n1' }));
    await post(SLICES, slice('web-c2', '10.252.2.1', { [CLUSTER]: 'c2' }));
    await post(SLICES, slice('web-plain', '10.252.3.1', {}));
    const kubeconfig = api.kubeconfig();
    [plain, named] = await Promise.all([
      startCanopyProcess({ services: [] }, ['--kubeconfig', kubeconfig, '--debounce-ms', '20']),
      startCanopyProcess({ services: [] }, ['--kubeconfig', `east=${kubeconfig}`, '--debounce-ms', '20']),
    ]);
  });

  after(async () => {
    ads?.close();
    await Promise.all([plain?.stop(), named?.stop()]);
    await api?.destroy();
  });

  it("one unnamed cluster: each slice's label is its endpoints' cluster scope", async () => {
    await serves(plain, '10.252.1.1 c1 n1, 10.252.2.1 c2 , 10.252.3.1  ');
  });

  it("a client in c1 (Istio's CLUSTER_ID) gets c1's endpoint first under routingPreference [cluster]", async () => {
    ads = new RawAdsStream(plain.xdsUri);
    const node = { id: 'grpc-c1', metadata: { fields: { CLUSTER_ID: { stringValue: 'c1' } } } };
    ads.send({ node, type_url: EDS, resource_names: ['web.default'] });
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
    assert.equal(placed, '10.252.1.1@0 10.252.2.1@1 10.252.3.1@1');
  });

  it('a relabelled slice moves its endpoint to the cluster it names', async () => {
    const r = await api.request('PUT', `${SLICES}/web-c2`, slice('web-c2', '10.252.2.1', { [CLUSTER]: 'c1' }));
    assert.equal(r.status, 200, JSON.stringify(r.body));
    await serves(plain, '10.252.1.1 c1 n1, 10.252.2.1 c1 , 10.252.3.1  ');
  });

  it("a named cluster's name wins over the label; the network label still counts", async () => {
    await serves(named, '10.252.1.1 east n1, 10.252.2.1 east , 10.252.3.1 east ');
  });
});
