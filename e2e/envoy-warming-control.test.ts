/**
 * The negative control of e2e/envoy-warming.test.ts, on real Envoy 1.40: that test's "active with nothing
 * warming within 5 s, 0 failed requests, no init_fetch_timeout" can fail. A SotW Envoy talks to Canopy
 * through a relay (e2e/support/ads-relay.ts) that, once told, drops every ClusterLoadAssignment: a server
 * silent after a Cluster change. Then a new service's Cluster and an updated one stay warming past 5 s;
 * requests to the new service fail (Envoy has no active cluster for its route) while the updated one keeps
 * serving on the old Cluster (so failed requests alone would miss an update left warming); after initial_fetch_timeout (15 s) the EDS subscriptions count
 * init_fetch_timeout and Envoy activates the clusters without their assignment, so the new one answers
 * `no healthy upstream`. With the relay passing again, the next assignment brings it up. No update is
 * rejected: a silent server is not a NACK, which is why the warming test checks the other counters too.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startAdsRelay, type AdsRelay } from './support/ads-relay.js';
import { startCanopyProcess, type CanopyProcess } from './support/canopy-process.js';
import { EnvoyProcess, envoySkip, explainFailure } from './support/envoy-process.js';
import { sendRequests, startHttpBackend, type HttpBackend } from './support/http-backends.js';

const skip = envoySkip();
const EDS = 'type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment';
const ADDR = '127.0.75.1';
const [WEB_PORT, LATE_PORT] = [20111, 20112];
/** envoy-warming.test.ts's bound for a change to be active. */
const WARM_MS = 5000;
const locality = { region: 'r1', zone: 'z1', subzone: 's1' };

describe('real Envoy: warming negative control (a server that never sends the CLA)', { skip }, () => {
  let canopy: CanopyProcess;
  let relay: AdsRelay;
  const backends: HttpBackend[] = [];
  const envoys: EnvoyProcess[] = [];
  const envoy = () => envoys[0]!;
  const service = (i: number, port: number, extra: object = {}) => ({
    port: 8080,
    outboundPort: port,
    protocol: 'http',
    endpoints: [{ address: backends[i]!.host, port: backends[i]!.port, locality }],
    ...extra,
  });

  before(async () => {
    for (const h of ['127.0.74.1', '127.0.74.2']) backends.push(await startHttpBackend(h));
    canopy = await startCanopyProcess({
      server: { debounceMs: 20 },
      services: [{ name: 'web', ...service(0, WEB_PORT) }],
    });
    relay = await startAdsRelay(canopy.xdsUri.replace(/^.*:\/\//, ''));
    envoys.push(
      await EnvoyProcess.start({
        xds: relay.address,
        nodeId: 'warm-control',
        locality,
        outboundAddress: ADDR,
        ads: 'sotw',
      }),
    );
  });
  after(async () => {
    await Promise.all(envoys.map((e) => e.stop()));
    await relay?.close();
    await canopy?.stop();
    await Promise.all(backends.map((b) => b.close()));
  });

  it('without the CLA: warming past 5 s, failed requests, then init_fetch_timeout', () =>
    explainFailure(
      () => envoys,
      async () => {
        const e = envoy();
        await e.until(
          async () => (await sendRequests(`${ADDR}:${WEB_PORT}`, 5)).by.get('127.0.74.1') === 5,
          30_000,
          'web',
        );
        relay.drop(EDS);
        const t0 = Date.now();
        const probe = async (when: string) => {
          const [w, l] = [await sendRequests(`${ADDR}:${WEB_PORT}`, 5), await sendRequests(`${ADDR}:${LATE_PORT}`, 5)];
          const why = [...new Set([...l.failed.keys()].map((k) => k.replace(/ @.*/, '')))];
          return `${when}: web ${w.by.get('127.0.74.1') ?? 0} ok, late failed ${JSON.stringify(why)} (${l.by.size} served)`;
        };
        let put = await canopy.admin('PUT', '/api/v1/services/late', service(1, LATE_PORT));
        assert.equal(put.status, 201, JSON.stringify(put.body));
        put = await canopy.admin('PUT', '/api/v1/services/web', service(0, WEB_PORT, { connectTimeoutMs: 2500 }));
        assert.equal(put.status, 200, JSON.stringify(put.body));
        await e.until(async () => (await e.stat('cluster_manager.warming_clusters')) === 2, WARM_MS, 'two warming');
        const probes: string[] = [await probe('warming')];
        await sleep(WARM_MS - (Date.now() - t0));
        // Where envoy-warming.test.ts gives up: both Clusters still warming.
        assert.equal(await e.stat('cluster_manager.warming_clusters'), 2);
        assert.ok(relay.dropped() > 0);
        probes.push(await probe(`at ${WARM_MS} ms`));
        await e.until(
          async () =>
            (await e.initFetchTimeouts()).size > 0 && (await e.stat('cluster_manager.warming_clusters')) === 0,
          20_000,
          'init_fetch_timeout',
        );
        probes.push(await probe(`init_fetch_timeout counted, ${Date.now() - t0} ms after the change`));
        console.log(`# ${probes.join('\n# ')}`);
        const timeouts = [...(await e.initFetchTimeouts())].map(([k]) => k).sort();
        assert.deepEqual(timeouts, ['cluster.late.init_fetch_timeout', 'cluster.web.init_fetch_timeout']);
        // Warming, the updated Cluster keeps serving on the old one; the new one has no cluster (503, no
        // body); once activated without an assignment it has no host.
        assert.match(probes[0]!, /web 5 ok, late failed \["503 "\]/);
        assert.match(probes[1]!, /web 5 ok, late failed \["503 "\]/);
        assert.match(probes[2]!, /web 5 ok, late failed \["503 no healthy upstream"\]/);
      },
    ));

  it('with the relay passing again, the next assignment brings the new service up', () =>
    explainFailure(
      () => envoys,
      async () => {
        relay.drop(undefined);
        // Both services change. The dropped responses left Canopy's last EDS nonce ahead of the last one Envoy
        // saw, so Envoy's requests since then are stale to Canopy (the xDS rule: a newer response is on its
        // way) and its subscription to `late` may never have been read. The first response Envoy now receives
        // is ACKed with the nonce Canopy expects and the names Envoy wants, which Canopy answers in full.
        for (const i of [0, 1]) {
          const key = `${backends[i]!.host}:${backends[i]!.port}`;
          const patch = await canopy.admin('PATCH', `/api/v1/services/${['web', 'late'][i]}/endpoints/${key}`, {
            weight: 2,
          });
          assert.equal(patch.status, 200, JSON.stringify(patch.body));
        }
        await envoy().until(
          async () => (await sendRequests(`${ADDR}:${LATE_PORT}`, 5)).by.get('127.0.74.2') === 5,
          30_000,
          'late served',
        );
      },
    ));

  it('no update was rejected: a silent server is not a NACK', () =>
    explainFailure(
      () => envoys,
      async () => assert.deepEqual([...(await envoy().rejected())], []),
    ));
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, Math.max(0, ms)));
