/**
 * Real Envoys in front of a Kubernetes Service, against a real kube-apiserver
 * (e2e/support/kube-apiserver.ts): Nodes in three zones, the Service `web` with
 * `trafficDistribution: PreferSameZone` and one EndpointSlice per zone, HTTP
 * backends on 10.244.42.x, and two Envoys (bootstrapped by `canopy bootstrap
 * envoy`) in zones z-a and z-b sending requests to `web.default` through
 * their outbound listeners. Requests land by zone; a readiness flip in a
 * slice fails z-a over and back; Kuma's MeshLoadBalancingStrategy CRD,
 * installed after Canopy started, is noticed, and a strategy that turns
 * locality awareness off spreads z-a's requests until it is deleted. No
 * Envoy rejects an update.
 *
 * e2e/kube-envoy.test.ts runs this in a network namespace of its own (the
 * API server refuses loopback addresses in EndpointSlices).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { CoreV1Api, CustomObjectsApi, DiscoveryV1Api, KubeConfig, type V1EndpointSlice } from '@kubernetes/client-node';
import { pino } from 'pino';
import { startCanopy, type Canopy } from '../server/src/main.js';
import { EnvoyProcess, envoySkip, explainFailure } from './support/envoy-process.js';
import { failures, sendRequests, startHttpBackend, type HttpBackend } from './support/http-backends.js';
import { kubeSkip, startKubeApiserver, type KubeApiserver } from './support/kube-apiserver.js';
import { installCrd, MESH_LB_STRATEGY } from './support/kube-crds.js';

const ZONES = ['z-a', 'z-b', 'z-c'] as const;
const NS = 'default';
const PORT = 8080;
const DUAL_PORT = 8081;
/** Each Envoy's outbound listener address, by zone. */
const OUTBOUND: Readonly<Record<string, string>> = { 'z-a': '127.0.62.1', 'z-b': '127.0.62.2' };

describe('real Envoys in front of a Kubernetes Service', { skip: kubeSkip() || envoySkip() }, () => {
  let api: KubeApiserver;
  let canopy: Canopy;
  let discovery: DiscoveryV1Api;
  let custom: CustomObjectsApi;
  const backends = new Map<string, HttpBackend>();
  const extra: HttpBackend[] = [];
  let core: CoreV1Api;
  const envoys = new Map<string, EnvoyProcess>();

  const slice = (zone: string, ready: boolean): V1EndpointSlice => ({
    metadata: { name: `web-${zone}`, namespace: NS, labels: { 'kubernetes.io/service-name': 'web' } },
    addressType: 'IPv4',
    ports: [{ name: 'http', port: backends.get(zone)!.port, protocol: 'TCP' }],
    endpoints: [{ addresses: [backends.get(zone)!.host], conditions: { ready }, nodeName: `node-${zone}`, zone }],
  });
  const putSlice = (s: V1EndpointSlice) =>
    discovery.replaceNamespacedEndpointSlice({ name: s.metadata!.name!, namespace: NS, body: s });
  /** Polls until 20 requests from the zone's Envoy, sent to `web.default`, all land on exactly `ids`. */
  const landsOn = (zone: string, ids: readonly string[]) => {
    const e = envoys.get(zone)!;
    return e.until(
      async () => {
        const t = await sendRequests(`${OUTBOUND[zone]}:${PORT}`, 20, { concurrency: 2, host: `web.${NS}` });
        return failures(t) === 0 && [...t.by.keys()].every((id) => ids.includes(id)) && ids.every((id) => t.by.has(id));
      },
      15_000,
      `requests from ${zone} on exactly ${ids.join(', ')}`,
    );
  };
  const all = () => [...envoys.values()];

  before(async () => {
    api = await startKubeApiserver();
    const kc = new KubeConfig();
    kc.loadFromFile(api.kubeconfig());
    core = kc.makeApiClient(CoreV1Api);
    discovery = kc.makeApiClient(DiscoveryV1Api);
    custom = kc.makeApiClient(CustomObjectsApi);
    for (const [i, zone] of ZONES.entries()) {
      backends.set(zone, await startHttpBackend(`10.244.42.${i + 1}`, `b-${zone}`));
      const labels = { 'topology.kubernetes.io/region': 'r1', 'topology.kubernetes.io/zone': zone };
      await core.createNode({ body: { metadata: { name: `node-${zone}`, labels } } });
    }
    await core.createNamespacedService({
      namespace: NS,
      body: {
        metadata: { name: 'web' },
        spec: { ports: [{ name: 'http', port: PORT, appProtocol: 'http' }], trafficDistribution: 'PreferSameZone' },
      },
    });
    for (const zone of ZONES) await discovery.createNamespacedEndpointSlice({ namespace: NS, body: slice(zone, true) });
    canopy = await startCanopy({
      config: { services: [], server: {} },
      host: '127.0.0.1',
      xdsPort: 0,
      adminPort: 0,
      debounceMs: 20,
      logger: pino({ level: process.env['CANOPY_TEST_LOG'] ?? 'silent' }),
      kube: { kubeconfig: api.kubeconfig(), unreachableMs: 1000, maxBackoffMs: 500, crdCheckMs: 500 },
    });
    for (const zone of ['z-a', 'z-b']) {
      const locality = { region: 'r1', zone, subzone: '' };
      // z-a's Envoy on delta with LEDS (the bootstrap's default; its collection names hold the empty subzone,
      // see e2e/envoy-leds.test.ts), z-b's on SotW: both protocols read the same Kubernetes source.
      const ads = zone === 'z-a' ? ('delta' as const) : ('sotw' as const);
      const xds = canopy.xdsAddress;
      envoys.set(
        zone,
        await EnvoyProcess.start({
          xds,
          nodeId: `envoy-${zone}`,
          locality,
          ads,
          outboundAddress: OUTBOUND[zone]!,
        }),
      );
    }
  });

  after(async () => {
    await Promise.all(all().map((e) => e.stop()));
    await canopy?.stop();
    await Promise.all([...backends.values(), ...extra].map((b) => b.close()));
    await api?.destroy();
  });

  it("requests to web.default land in each Envoy's own zone", () =>
    explainFailure(all, async () => {
      for (const zone of envoys.keys()) await landsOn(zone, [`b-${zone}`]);
    }));

  it("a readiness flip in z-a's slice fails z-a over to the other zones, and back", () =>
    explainFailure(all, async () => {
      await putSlice(slice('z-a', false));
      await landsOn('z-a', ['b-z-b', 'b-z-c']);
      await landsOn('z-b', ['b-z-b']);
      await putSlice(slice('z-a', true));
      await landsOn('z-a', ['b-z-a']);
    }));

  it("Kuma's CRD installed after the start is read live: a MeshLoadBalancingStrategy moves clients, and back", () =>
    explainFailure(all, async () => {
      await installCrd(api, MESH_LB_STRATEGY);
      const mlbs = { group: 'kuma.io', version: 'v1alpha1', namespace: NS, plural: 'meshloadbalancingstrategies' };
      await custom.createNamespacedCustomObject({
        ...mlbs,
        body: {
          apiVersion: 'kuma.io/v1alpha1',
          kind: 'MeshLoadBalancingStrategy',
          metadata: { name: 'web-lb', namespace: NS },
          spec: {
            targetRef: { kind: 'Mesh' },
            to: [
              {
                targetRef: { kind: 'MeshService', name: `web_${NS}_svc_${PORT}` },
                default: { localityAwareness: { disabled: true } },
              },
            ],
          },
        },
      });
      // Locality awareness off: every zone's backend, from either Envoy.
      await landsOn('z-a', ['b-z-a', 'b-z-b', 'b-z-c']);
      await landsOn('z-b', ['b-z-a', 'b-z-b', 'b-z-c']);
      // Without a locality policy the service is served over LEDS to z-a's delta Envoy (its collection names
      // hold the empty subzone), in the assignment to z-b's SotW Envoy.
      const leds = (zone: string) => envoys.get(zone)!.stat('cluster.web.default.leds.update_success');
      assert.ok(((await leds('z-a')) ?? 0) >= 1, 'z-a took the endpoints over LEDS');
      assert.equal(await leds('z-b'), undefined);
      await custom.deleteNamespacedCustomObject({ ...mlbs, name: 'web-lb' });
      await landsOn('z-a', ['b-z-a']);
      await landsOn('z-b', ['b-z-b']);
    }));

  it('a dual-stack Service: IPv4 and IPv6 slices give endpoints of both families, each Envoy its own zone', () =>
    explainFailure(all, async () => {
      const v4 = await startHttpBackend('10.244.42.11', 'dual-v4-z-a');
      const v6 = await startHttpBackend('fd00:10:244::11', 'dual-v6-z-b');
      extra.push(v4, v6);
      const svc = await core.createNamespacedService({
        namespace: NS,
        body: {
          metadata: { name: 'dual' },
          spec: {
            ipFamilyPolicy: 'RequireDualStack',
            ipFamilies: ['IPv4', 'IPv6'],
            ports: [{ name: 'http', port: DUAL_PORT, appProtocol: 'http' }],
            trafficDistribution: 'PreferSameZone',
          },
        },
      });
      assert.equal(svc.spec?.clusterIPs?.length, 2, 'the API server gave a cluster IP of each family');
      for (const [family, b, zone] of [
        ['IPv4', v4, 'z-a'],
        ['IPv6', v6, 'z-b'],
      ] as const) {
        await discovery.createNamespacedEndpointSlice({
          namespace: NS,
          body: {
            metadata: {
              name: `dual-${family.toLowerCase()}`,
              namespace: NS,
              labels: { 'kubernetes.io/service-name': 'dual' },
            },
            addressType: family,
            ports: [{ name: 'http', port: b.port }],
            endpoints: [{ addresses: [b.host], conditions: { ready: true }, nodeName: `node-${zone}` }],
          },
        });
      }
      const dual = `${OUTBOUND['z-a']}:${DUAL_PORT}`;
      for (const [zone, id] of [
        ['z-a', 'dual-v4-z-a'],
        ['z-b', 'dual-v6-z-b'],
      ] as const) {
        const target = `${OUTBOUND[zone]}:${DUAL_PORT}`;
        await envoys.get(zone)!.until(
          async () => {
            const t = await sendRequests(target, 10, { concurrency: 2, host: `dual.${NS}` });
            return failures(t) === 0 && t.by.get(id) === 10;
          },
          15_000,
          `requests to dual.${NS} from ${zone} on ${id} (${dual})`,
        );
      }
      const held = (await (await fetch(`http://${canopy.adminAddress}/api/v1/services/dual.${NS}`)).json()) as {
        vip?: string;
        vips?: string[];
      };
      // Canopy's service has both cluster IPs, the primary first (docs/kubernetes.md).
      assert.equal(held.vip, svc.spec?.clusterIPs?.[0]);
      assert.deepEqual(held.vips, svc.spec?.clusterIPs);
      assert.notEqual(held.vips?.[0]?.includes(':'), held.vips?.[1]?.includes(':'), 'one VIP per family');
    }));

  it('no Envoy rejected an update', async () => {
    for (const e of all()) assert.deepEqual([...(await e.rejected())], [], e.nodeId);
  });
});
