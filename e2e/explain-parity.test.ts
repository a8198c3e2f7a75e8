/**
 * `canopy explain` against a running `canopy serve` (its admin API), and a
 * raw ADS peer against the same server: a proposal written for another host
 * is flagged, overprovisioning-factor changes are listed, Istio's topology
 * label keys name the client's network and cluster, and a node label called
 * `__proto__` is a label like any other, over xDS and in explain.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { envoyType } from '../server/test/support/envoy-protos.js';
import { runCanopyCli } from './support/canopy-cli.js';
import { startCanopyProcess, type CanopyProcess } from './support/canopy-process.js';
import { RawAdsStream } from './support/raw-ads.js';

const EDS = 'type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment';

const CONFIG = `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: { name: reviews }
spec:
  host: reviews
  trafficPolicy:
    outlierDetection: { consecutive5xxErrors: 5 }
    loadBalancer: { localityLbSetting: { failoverPriority: [topology.istio.io/network, topology.istio.io/cluster] } }
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: { name: reviews }
spec:
  hosts: [reviews]
  ports: [{ number: 9080, name: grpc }]
  endpoints:
    - { address: 10.1.0.1, network: n1, labels: { topology.istio.io/cluster: c1 } }
    - { address: 10.1.0.2, network: n2, labels: { topology.istio.io/cluster: c2 } }
---
services:
  - name: tagged
    port: 80
    loadBalancing: { mode: random, routingPreference: [zone], policy: { failoverPriority: ["label:__proto__"] } }
    endpoints:
      - { address: 10.2.0.1, port: 80, labels: { __proto__: gold } }
      - { address: 10.2.0.2, port: 80, labels: { __proto__: silver } }
`;

interface DecodedCla {
  endpoints?: {
    priority?: number;
    lb_endpoints?: { endpoint?: { address?: { socket_address?: { address?: string } } } }[];
  }[];
}

describe('canopy explain and the client it explains', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-explain-'));
  let canopy: CanopyProcess;
  const streams: RawAdsStream[] = [];
  const explain = (...args: string[]) => runCanopyCli(['explain', '--admin', canopy.adminUrl, ...args]);

  before(async () => {
    canopy = await startCanopyProcess(CONFIG);
  });
  after(async () => {
    for (const s of streams) s.close();
    await canopy?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('Istio topology label keys name the network and cluster', async () => {
    const r = await explain(
      '--service',
      'reviews',
      '--label',
      'topology.istio.io/network=n2',
      '--label',
      'topology.istio.io/cluster=c2',
      '--json',
    );
    assert.equal(r.code, 0, r.stderr);
    const x = JSON.parse(r.stdout) as {
      client: { network: string; cluster: string };
      endpoints: { address: string; priority: number }[];
    };
    assert.equal(x.client.network, 'n2');
    assert.equal(x.client.cluster, 'c2');
    assert.equal(x.endpoints.find((e) => e.address === '10.1.0.2')?.priority, 0);
    assert.equal(x.endpoints.find((e) => e.address === '10.1.0.1')?.priority, 1);
    // A client whose node carries only those labels (no NETWORK/CLUSTER_ID) gets what explain says.
    const ads = new RawAdsStream(canopy.xdsUri);
    streams.push(ads);
    const labels = { 'topology.istio.io/network': 'n2' };
    const fields = Object.fromEntries(Object.entries(labels).map(([k, v]) => [k, { stringValue: v }]));
    ads.send({
      node: { id: 'istio-labels', metadata: { fields: { labels: { structValue: { fields } } } } },
      type_url: EDS,
      resource_names: ['reviews'],
    });
    const res = await ads.next(10_000);
    const type = envoyType('envoy.config.endpoint.v3.ClusterLoadAssignment');
    const cla = type.toObject(type.decode(res.resources[0]!.value)) as DecodedCla;
    const p0 = (cla.endpoints ?? [])
      .filter((g) => (g.priority ?? 0) === 0)
      .flatMap((g) => (g.lb_endpoints ?? []).map((e) => e.endpoint?.address?.socket_address?.address));
    assert.deepEqual(p0, ['10.1.0.2']);
  });

  it('a proposal for another host is flagged; an overprovisioning-factor change is listed', async () => {
    const other = path.join(dir, 'other.yaml');
    writeFileSync(
      other,
      `type: MeshLoadBalancingStrategy
name: other
mesh: default
spec:
  to:
    - targetRef: { kind: MeshService, name: ratings }
      default: { localityAwareness: { crossZone: { failover: [{ to: { type: Any } }] } } }
`,
    );
    const r = await explain('--service', 'reviews', '--policy', other);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^warning: the proposed policy is for "ratings", explained for "reviews"/m);
    assert.match(r.stdout, /^ {2}overprovisioningFactor: 140 → 200$/m);
  });

  it('a node label named __proto__ is read over xDS and in explain', async () => {
    const ads = new RawAdsStream(canopy.xdsUri);
    streams.push(ads);
    ads.send({
      node: {
        id: 'proto',
        metadata: { fields: { labels: { structValue: { fields: { ['__proto__']: { stringValue: 'silver' } } } } } },
      },
      type_url: EDS,
      resource_names: ['tagged'],
    });
    const res = await ads.next(10_000);
    const type = envoyType('envoy.config.endpoint.v3.ClusterLoadAssignment');
    const cla = type.toObject(type.decode(res.resources[0]!.value)) as DecodedCla;
    const p0 = (cla.endpoints ?? [])
      .filter((g) => (g.priority ?? 0) === 0)
      .flatMap((g) => (g.lb_endpoints ?? []).map((e) => e.endpoint?.address?.socket_address?.address));
    assert.deepEqual(p0, ['10.2.0.2']);
    const r = await explain('--service', 'tagged', '--label', '__proto__=silver', '--json');
    const x = JSON.parse(r.stdout) as { endpoints: { address: string; priority: number }[] };
    assert.equal(x.endpoints.find((e) => e.address === '10.2.0.2')?.priority, 0);
  });
});
