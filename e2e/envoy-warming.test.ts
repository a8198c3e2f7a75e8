/**
 * Envoy's warming over real ADS streams against a spawned `canopy serve`:
 * an emulated stock Envoy (e2e/support/envoy-peer.ts: its SotW re-request, its
 * silence on delta, its LEDS watches per cluster) must see every Cluster
 * change followed by the cluster's ClusterLoadAssignment (and on LEDS the
 * collections' members), and every Listener change by its RouteConfiguration,
 * well before initial_fetch_timeout (15 s), with nothing sent in a loop after.
 * Rules: xds_protocol.rst "Resource warming"; GrpcMuxImpl::addWatch (SotW
 * re-request with the same names, version and nonce); WatchMap::updateWatchInterest
 * (delta: a name already watched is not subscribed again); EdsClusterImpl
 * (a cluster's LEDS subscriptions are its own).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startCanopyProcess, type CanopyProcess } from './support/canopy-process.js';
import { CDS, EDS, EnvoyPeer, LEDS, RDS } from './support/envoy-peer.js';

const SERVICE = 'warm-a';
/** Well under Envoy's initial_fetch_timeout (15 s): a server that stays silent fails here. */
const WARM_MS = 6000;

function body(extra: Record<string, unknown> = {}) {
  return {
    port: 8080,
    outboundPort: 20000,
    protocol: 'grpc',
    endpoints: [
      { address: '127.0.31.1', port: 8080, locality: { region: 'r1', zone: 'z1', subzone: 's1' } },
      { address: '127.0.31.2', port: 8080, locality: { region: 'r1', zone: 'z2', subzone: 's1' } },
    ],
    ...extra,
  };
}

function envoyNode(id: string, leds?: boolean) {
  const fields: Record<string, { stringValue: string }> = { 'canopy.outbound_address': { stringValue: '127.0.0.1' } };
  if (leds === false) fields['canopy.leds'] = { stringValue: 'false' };
  return {
    id,
    cluster: 'test',
    locality: { region: 'r1', zone: 'z1', sub_zone: 's1' },
    user_agent_name: 'envoy',
    metadata: { fields },
  };
}

/** Cluster changes that push CDS and nothing else (the list), applied one after another. */
const CLUSTER_CHANGES: [string, Record<string, unknown>][] = [
  ['protocol', { protocol: 'http' }],
  ['connectTimeoutMs', { protocol: 'http', connectTimeoutMs: 2500 }],
  ['outlierDetection', { protocol: 'http', connectTimeoutMs: 2500, outlierDetection: { consecutive5xx: 3 } }],
  [
    'healthCheck',
    {
      protocol: 'http',
      connectTimeoutMs: 2500,
      outlierDetection: { consecutive5xx: 3 },
      healthCheck: { path: '/healthz' },
    },
  ],
];

describe('Envoy warming: every Cluster and Listener change is followed by what it waits for', () => {
  let canopy: CanopyProcess;
  const peers: EnvoyPeer[] = [];
  const address = () => canopy.xdsUri.replace(/^.*:\/\//, '');

  before(async () => {
    canopy = await startCanopyProcess({ server: { debounceMs: 20 }, services: [{ name: SERVICE, ...body() }] });
  });
  after(async () => {
    for (const p of peers) p.close();
    await canopy?.stop();
  });

  const cases: [string, 'sotw' | 'delta', boolean | undefined][] = [
    ['SotW (GrpcMuxImpl::addWatch re-request)', 'sotw', undefined],
    ['delta with LEDS (Envoy sends nothing; EdsClusterImpl LEDS watches)', 'delta', true],
    ['delta with full CLAs (canopy.leds: false)', 'delta', false],
  ];
  for (const [title, protocol, leds] of cases) {
    it(`xds_protocol.rst "Resource warming", ${title}`, async () => {
      await canopy.admin('PUT', `/api/v1/services/${SERVICE}`, body());
      const peer = new EnvoyPeer(address(), { node: envoyNode(`warm-${protocol}-${String(leds)}`, leds), protocol });
      peers.push(peer);
      peer.start();
      const ready = () => peer.clusters.has(SERVICE) && peer.listeners.has(SERVICE) && peer.warming.size === 0;
      await peer.until(ready, WARM_MS, 'initial sync');
      if (leds)
        assert.ok(
          peer.received.some((r) => r.typeUrl === LEDS && r.names.length > 0),
          'endpoints came over LEDS',
        );

      for (const [what, change] of CLUSTER_CHANGES) {
        const updates = peer.updates;
        const from = peer.received.length;
        const put = await canopy.admin('PUT', `/api/v1/services/${SERVICE}`, body(change));
        assert.equal(put.status, 200, JSON.stringify(put.body));
        await peer.until(() => peer.updates > updates, WARM_MS, `${what}: the Cluster update`);
        await peer.until(() => peer.warming.size === 0, WARM_MS, `${what}: the cluster warm again`);
        const after = peer.received.slice(from);
        assert.ok(
          after.some((r) => r.typeUrl === EDS && r.names.includes(SERVICE)),
          `${what}: its CLA was sent again`,
        );
      }

      // A Listener change (its bind port): the RouteConfiguration follows.
      const updates = peer.updates;
      await canopy.admin('PUT', `/api/v1/services/${SERVICE}`, body({ outboundPort: 20001 }));
      await peer.until(() => peer.updates > updates && peer.warming.size === 0, WARM_MS, 'listener change');
      assert.ok(peer.received.some((r) => r.typeUrl === RDS && r.names.includes(SERVICE)));

      // Re-creation: the cluster goes, comes back, and warms.
      await canopy.admin('DELETE', `/api/v1/services/${SERVICE}`);
      await peer.until(() => !peer.clusters.has(SERVICE) && !peer.listeners.has(SERVICE), WARM_MS, 'deletion');
      await canopy.admin('PUT', `/api/v1/services/${SERVICE}`, body({ connectTimeoutMs: 1500 }));
      await peer.until(ready, WARM_MS, 're-creation');

      // And nothing more: no resend loop once everything is warm and acknowledged.
      const settled = peer.received.length;
      await new Promise((r) => setTimeout(r, 600));
      assert.deepEqual(peer.received.slice(settled), [], 'quiet once warm');
      assert.ok(peer.received.filter((r) => r.typeUrl === CDS).length >= 6);
    });
  }
});
