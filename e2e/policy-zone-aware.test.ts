/**
 * Istio's zoneAwareLbSetting the way a user meets it (issue 22 item 4):
 * `canopy import istio` of a DestinationRule and ServiceEntries, the output
 * served by `canopy serve --config`, read over real ADS by an emulated Envoy
 * sidecar whose node names its own service (`canopy bootstrap envoy
 * --local-service`): its cluster carries zone_aware_lb_config, its CLA the
 * region tiers (own region, the failover region, the rest) with every zone
 * its own locality at priority 0, and its `local_cluster` its own service's
 * endpoints in its region. Envoy's zone-aware split computed from what was
 * received (e2e/support/envoy-zone-aware.ts) keeps each client's zone as
 * loaded as its own service's share of it.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { envoyType } from '../server/test/support/envoy-protos.js';
import { pgvCheckBytes } from '../server/test/support/pgv.js';
import { runCanopyCli } from './support/canopy-cli.js';
import { startCanopyProcess, type CanopyProcess } from './support/canopy-process.js';
import { CDS, EDS } from './support/envoy-peer.js';
import { zoneAwareShares, type LocalityHosts } from './support/envoy-zone-aware.js';
import { RawAdsStream } from './support/raw-ads.js';

type Obj = Record<string, unknown>;

const ISTIO = `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: { name: catalog }
spec:
  host: catalog
  trafficPolicy:
    loadBalancer:
      simple: ROUND_ROBIN
      zoneAwareLbSetting: { enabled: true, minClusterSize: 1, failover: [{ from: us, to: eu }] }
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: { name: catalog }
spec:
  hosts: [catalog]
  ports: [{ number: 9080, name: grpc }]
  resolution: STATIC
  endpoints:
    - { address: 127.0.41.1, locality: us/us-a }
    - { address: 127.0.41.2, locality: us/us-a }
    - { address: 127.0.41.3, locality: us/us-b }
    - { address: 127.0.41.4, locality: us/us-b }
    - { address: 127.0.41.5, locality: eu/eu-a }
    - { address: 127.0.41.6, locality: ap/ap-a }
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: { name: reviews }
spec:
  hosts: [reviews]
  ports: [{ number: 9080, name: grpc }]
  resolution: STATIC
  endpoints:
    - { address: 127.0.42.1, locality: us/us-a }
    - { address: 127.0.42.2, locality: us/us-a }
    - { address: 127.0.42.3, locality: us/us-a }
    - { address: 127.0.42.4, locality: us/us-b }
    - { address: 127.0.42.5, locality: eu/eu-a }
`;

function decode(typeName: string, value: Uint8Array): Obj {
  assert.deepEqual(pgvCheckBytes(typeName, value), [], typeName);
  const t = envoyType(typeName);
  return t.toObject(t.decode(value), { enums: String, longs: Number, arrays: true }) as Obj;
}

/** Healthy hosts per zone at priority 0 of a CLA (every endpoint sent here is healthy). */
function p0Zones(cla: Obj): LocalityHosts[] {
  return ((cla['endpoints'] as Obj[] | undefined) ?? [])
    .filter((g) => (g['priority'] ?? 0) === 0)
    .map((g) => ({ locality: String((g['locality'] as Obj)['zone']), hosts: (g['lb_endpoints'] as Obj[]).length }));
}

describe('Istio zoneAwareLbSetting: import → serve → an Envoy sidecar over real ADS', () => {
  let canopy: CanopyProcess;
  const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-zone-aware-'));

  before(async () => {
    const file = path.join(dir, 'istio.yaml');
    writeFileSync(file, ISTIO);
    const imported = await runCanopyCli(['import', 'istio', file]);
    assert.equal(imported.code, 0, imported.stderr);
    assert.match(imported.stdout, /# note: .*zoneAwareLbSetting: Envoy sidecars get zone-aware routing/);
    canopy = await startCanopyProcess(`server: { debounceMs: 20 }\n${imported.stdout}`);
  });
  after(async () => {
    await canopy?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  /** What an Envoy in `zone` (region us) whose own service is reviews receives for catalog. */
  async function sidecar(zone: string): Promise<{ cluster: Obj; cla: Obj; local: Obj }> {
    const node = {
      id: `za-${zone}`,
      cluster: 'reviews',
      locality: { region: 'us', zone, sub_zone: '' },
      user_agent_name: 'envoy',
      metadata: {
        fields: {
          'canopy.outbound_address': { stringValue: '127.0.0.1' },
          'canopy.local_service': { stringValue: 'reviews' },
        },
      },
    };
    const ads = new RawAdsStream(canopy.xdsUri.replace(/^.*:\/\//, ''));
    try {
      ads.send({ node, type_url: CDS, resource_names: [] });
      const cds = await ads.next(5000);
      assert.equal(cds.type_url, CDS);
      const clusters = cds.resources.map((r) => decode('envoy.config.cluster.v3.Cluster', r.value));
      const cluster = clusters.find((c) => c['name'] === 'catalog')!;
      ads.send({ type_url: CDS, resource_names: [], version_info: cds.version_info, response_nonce: cds.nonce });
      // The bootstrap's local_cluster (EDS) and the catalog cluster's CLA, as Envoy asks for them.
      ads.send({ node, type_url: EDS, resource_names: ['catalog', 'local_cluster'] });
      const byName = new Map<string, Obj>();
      while (byName.size < 2) {
        const r = await ads.next(5000);
        if (r.type_url !== EDS) continue;
        for (const x of r.resources) {
          const cla = decode('envoy.config.endpoint.v3.ClusterLoadAssignment', x.value);
          byName.set(String(cla['cluster_name']), cla);
        }
      }
      return { cluster, cla: byName.get('catalog')!, local: byName.get('local_cluster')! };
    } finally {
      ads.close();
    }
  }

  it('the cluster has zone_aware_lb_config; the CLA has the region tiers; local_cluster the own service in the region', async () => {
    const { cluster, cla, local } = await sidecar('us-a');
    assert.deepEqual(cluster['common_lb_config'], { zone_aware_lb_config: { min_cluster_size: { value: 1 } } });
    const tiers = (cla['endpoints'] as Obj[])
      .map((g) => `${(g['locality'] as Obj)['zone']}:${g['priority'] ?? 0}`)
      .sort();
    assert.deepEqual(tiers, ['ap-a:2', 'eu-a:1', 'us-a:0', 'us-b:0']);
    assert.deepEqual(
      p0Zones(local).sort((a, b) => a.locality.localeCompare(b.locality)),
      [
        { locality: 'us-a', hosts: 3 },
        { locality: 'us-b', hosts: 1 },
      ],
    );
  });

  it("Envoy's split keeps each zone as loaded as the caller's own service there", async () => {
    // us-a holds 3 of the 4 callers but half of catalog: it keeps 2/3 of its calls, the rest go to us-b.
    const a = await sidecar('us-a');
    const fromA = zoneAwareShares(p0Zones(a.cla), p0Zones(a.local), 'us-a', { minClusterSize: 1 });
    assert.ok(fromA);
    assert.ok(Math.abs(fromA.get('us-a')! - 2 / 3) < 0.001, JSON.stringify([...fromA]));
    assert.ok(Math.abs(fromA.get('us-b')! - 1 / 3) < 0.001, JSON.stringify([...fromA]));
    // us-b holds 1 of 4 callers and half of catalog: all its calls stay in us-b.
    const b = await sidecar('us-b');
    const fromB = zoneAwareShares(p0Zones(b.cla), p0Zones(b.local), 'us-b', { minClusterSize: 1 });
    assert.deepEqual(fromB && [...fromB].sort(), [
      ['us-a', 0],
      ['us-b', 1],
    ]);
  });

  it('the sidecars NACKed nothing', async () => {
    const metrics = await fetch(`${canopy.adminUrl}/metrics`).then((r) => r.text());
    assert.doesNotMatch(metrics, /canopy_xds_nacks_total\{[^}]*\} [1-9]/);
  });
});
