/**
 * Real Envoy 1.40 on delta ADS with LEDS, as `canopy bootstrap envoy` writes it, with zones whose subzone is
 * empty (as Kubernetes gives): collection names with an escaped segment, which Envoy must subscribe to as
 * the CLA spells them (docs/envoy.md, "Checked against a real Envoy").
 * - a service's mode changed from `failover` (a PreferSameZone policy: full CLAs) to `random` (LEDS
 *   collections) over the admin API: Envoy moves every host to priority 0, what /debug/explain says;
 * - a service PUT while the Envoy starts (Canopy holding no other): the Envoy is LIVE without waiting out an
 *   initial fetch timeout, and routes to it.
 * Each case ends asserting no xDS update was rejected.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startCanopyProcess, type CanopyProcess } from './support/canopy-process.js';
import { EnvoyProcess, envoySkip, explainFailure } from './support/envoy-process.js';
import { sendRequests, startHttpBackend, type HttpBackend } from './support/http-backends.js';

const skip = envoySkip();
/** Each Envoy's outbound listener address. */
const LISTEN = '127.0.71.1';
const LATE_LISTEN = '127.0.71.2';
const PORT = 20086;
/** The second case's service: a port of its own, apart from the first one's draining listener. */
const API_PORT = 20088;
const near = { region: 'r1', zone: 'z1', subzone: '' };

function entry(name: string, backends: readonly HttpBackend[], mode: string, policy?: object) {
  return {
    name,
    port: name === 'api' ? API_PORT : PORT,
    protocol: 'http',
    loadBalancing: { mode, routingPreference: ['zone'], ...(policy ? { policy } : {}) },
    endpoints: backends.map((b, i) => ({
      address: b.host,
      port: b.port,
      locality: { region: 'r1', zone: `z${i + 1}`, subzone: '' },
    })),
  };
}

async function priorities(envoy: EnvoyProcess, cluster: string): Promise<string> {
  const c = (await envoy.clusters()).find((x) => x.name === cluster);
  return (c?.hosts ?? [])
    .map((h) => `${h.address.split(':')[0]}@${h.priority}`)
    .sort()
    .join(' ');
}

async function noRejections(envoy: EnvoyProcess): Promise<void> {
  assert.deepEqual([...(await envoy.rejected())], [], 'update_rejected = 0');
}

describe('real Envoy on delta + LEDS: a mode change and a service created after start', { skip }, () => {
  let canopy: CanopyProcess;
  const envoys: EnvoyProcess[] = [];
  const backends: HttpBackend[] = [];

  before(async () => {
    for (const h of ['127.0.76.1', '127.0.76.2', '127.0.76.3', '127.0.76.4']) backends.push(await startHttpBackend(h));
    canopy = await startCanopyProcess({
      server: { debounceMs: 20 },
      services: [entry('web', backends.slice(0, 3), 'failover', { trafficDistribution: 'PreferSameZone' })],
    });
  });
  after(async () => {
    for (const e of envoys) await e.stop();
    await canopy?.stop();
    await Promise.all(backends.map((b) => b.close()));
  });

  it('failover → random: every LEDS host moves to priority 0, as /debug/explain says', () =>
    explainFailure(
      () => envoys,
      async () => {
        const envoy = await EnvoyProcess.start({
          xds: canopy.xdsUri,
          nodeId: 'leds-mode',
          locality: near,
          outboundAddress: LISTEN,
        });
        envoys.push(envoy);
        const want0 = '127.0.76.1@0 127.0.76.2@1 127.0.76.3@1';
        await envoy.until(async () => (await priorities(envoy, 'web')) === want0, 30_000, `web at ${want0}`);
        const put = await canopy.admin('PUT', '/api/v1/services/web', entry('web', backends.slice(0, 3), 'random'));
        assert.equal(put.status, 200, JSON.stringify(put.body));
        const q = 'service=web&region=r1&zone=z1&subzone=s1';
        const ex = (await canopy.admin('GET', `/debug/explain?${q}`)).body as { endpoints?: { priority: number }[] };
        assert.deepEqual(
          (ex.endpoints ?? []).map((e) => e.priority),
          [0, 0, 0],
          JSON.stringify(ex),
        );
        const want1 = '127.0.76.1@0 127.0.76.2@0 127.0.76.3@0';
        await envoy.until(async () => (await priorities(envoy, 'web')) === want1, 30_000, `web at ${want1}`);
        assert.ok((await envoy.stat('cluster.web.leds.update_success'))! >= 1, 'web endpoints came over LEDS');
        assert.deepEqual([...(await envoy.initFetchTimeouts())], []);
        await noRejections(envoy);
        await envoy.stop();
      },
    ));

  it('a service PUT while the Envoy starts: LIVE without an initial fetch timeout, and it routes', () =>
    explainFailure(
      () => envoys,
      async () => {
        assert.equal((await canopy.admin('DELETE', '/api/v1/services/web')).status, 204);
        const t0 = Date.now();
        const late = startEnvoyLate(canopy, envoys);
        const put = await canopy.admin('PUT', '/api/v1/services/api', entry('api', backends.slice(3), 'failover'));
        assert.equal(put.status, 201, JSON.stringify(put.body));
        const envoy = await late;
        const live = Date.now() - t0;
        console.log(`# LEDS Envoy LIVE ${live} ms after its start, its service PUT meanwhile (loaded machine)`);
        await envoy.until(
          async () => (await sendRequests(`${LATE_LISTEN}:${API_PORT}`, 1, { concurrency: 1 })).by.has('127.0.76.4'),
          30_000,
          'api routes to its endpoint',
        );
        const t = await sendRequests(`${LATE_LISTEN}:${API_PORT}`, 4, { concurrency: 1 });
        assert.deepEqual([...t.by], [['127.0.76.4', 4]], JSON.stringify([...t.failed]));
        assert.ok((await envoy.stat('cluster.api.leds.update_success'))! >= 1, 'api endpoints came over LEDS');
        assert.deepEqual([...(await envoy.initFetchTimeouts())], [], 'no subscription waited out its initial fetch');
        assert.ok(live < 10_000, `LIVE in ${live} ms: not after Envoy's 15 s initial fetch timeout`);
        await noRejections(envoy);
      },
    ));
});

/** Starts an Envoy that waits for LIVE; the test PUTs its service meanwhile. */
function startEnvoyLate(canopy: CanopyProcess, envoys: EnvoyProcess[]): Promise<EnvoyProcess> {
  return EnvoyProcess.start({
    xds: canopy.xdsUri,
    nodeId: 'leds-late',
    locality: near,
    outboundAddress: LATE_LISTEN,
  }).then((e) => {
    envoys.push(e);
    return e;
  });
}
