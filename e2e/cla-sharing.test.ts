/**
 * 1,000 ADS clients in 1,000 distinct localities against a real server: the
 * number of distinct CLAs is bounded by the tree, not by the clients, and
 * clients that match the same tree node receive the very same bytes.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { pino } from 'pino';
import type { ServiceSpec } from '../server/src/domain/service.js';
import { startCanopy, type Canopy } from '../server/src/main.js';
import { RawAdsStream } from './support/raw-ads.js';

const EDS = 'type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment';
const CLIENTS = 1000;
const REGIONS = ['r1', 'r2', 'r3'];
const ZONES = ['z1', 'z2', 'z3'];
const SUBZONES = ['s1', 's2', 's3'];

function mesh(): ServiceSpec {
  let host = 1;
  const endpoints = REGIONS.flatMap((region) =>
    ZONES.flatMap((zone) =>
      SUBZONES.map((subzone) => ({
        address: `127.1.${host >> 8}.${host++ & 255}`,
        port: 9000,
        locality: { region, zone, subzone },
        network: '',
        node: '',
        cluster: '',
        labels: {},
        health: 'healthy' as const,
        weight: 1,
      })),
    ),
  );
  return {
    name: 'echo',
    loadBalancing: {
      mode: 'failover',
      routingPreference: ['region', 'zone', 'subzone'],
      crossNetworkFailover: true,
      overprovisioningFactor: 140,
    },
    endpoints,
  };
}

/** Client i's locality: 27 exactly on the tree's leaves, the rest distinct and partly off its paths. */
function localityOf(i: number): { region: string; zone: string; sub_zone: string } {
  if (i < 27)
    return {
      region: REGIONS[i % 3] ?? '',
      zone: ZONES[Math.floor(i / 3) % 3] ?? '',
      sub_zone: SUBZONES[Math.floor(i / 9)] ?? '',
    };
  return { region: REGIONS[i % 4] ?? `rx${i % 7}`, zone: ZONES[(i >> 2) % 4] ?? `zx${i % 11}`, sub_zone: `x${i}` };
}

describe(`${CLIENTS} ADS clients in ${CLIENTS} localities`, () => {
  let canopy: Canopy;
  const streams: RawAdsStream[] = [];

  before(async () => {
    canopy = await startCanopy({
      config: { services: [mesh()], server: {} },
      host: '127.0.0.1',
      xdsPort: 0,
      adminPort: 0,
      logger: pino({ level: 'silent' }),
    });
  });
  after(async () => {
    for (const s of streams) s.close();
    await canopy?.stop();
  });

  it('share one encoded CLA per matched tree node', async () => {
    const seen = new Set<string>();
    const byKey = new Map<string, string>();
    const replies = await Promise.all(
      Array.from({ length: CLIENTS }, async (_, i) => {
        const locality = localityOf(i);
        seen.add(`${locality.region}/${locality.zone}/${locality.sub_zone}`);
        const s = new RawAdsStream(canopy.xdsAddress);
        streams.push(s);
        s.send({ node: { id: `c${i}`, locality }, type_url: EDS, resource_names: ['echo'] });
        const r = await s.next(20_000);
        const value = r.resources[0]?.value;
        assert.ok(value, `client ${i} got a CLA`);
        return { locality, hash: createHash('sha256').update(value).digest('hex') };
      }),
    );
    assert.equal(seen.size, CLIENTS, 'every client is in its own locality');

    const service = canopy.mesh.get('echo');
    assert.ok(service);
    const stats = canopy.claCache.stats();
    const distinct = new Set(replies.map((r) => r.hash)).size;
    // Clients that reach the same tree node hold identical bytes.
    for (const r of replies) {
      const node = service.tree.match([r.locality.region, r.locality.zone, r.locality.sub_zone]);
      const prev = byKey.get(String(node.id));
      if (prev) assert.equal(r.hash, prev, `clients at node ${node.path().join('/')} share bytes`);
      byKey.set(String(node.id), r.hash);
    }
    assert.equal(distinct, byKey.size);
    assert.equal(stats.entries, distinct);
    assert.ok(
      stats.entries <= service.tree.nodeCount,
      `${stats.entries} entries <= ${service.tree.nodeCount} tree nodes`,
    );
    assert.equal(stats.misses, distinct, 'each distinct CLA built and encoded once');
    assert.equal(canopy.ads.connected, CLIENTS);
    console.log(
      `# ${CLIENTS} clients, ${seen.size} client localities, ${stats.entries} cached CLAs, ${service.tree.nodeCount} tree nodes, ${stats.hits} hits / ${stats.misses} misses`,
    );
  });
});
