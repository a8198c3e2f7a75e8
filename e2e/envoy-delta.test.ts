/**
 * Delta xDS on real Envoy 1.40, with the bootstrap `canopy bootstrap envoy` writes (delta ADS, legacy
 * wildcard CDS and LDS) and lazy xDS on for the node (`canopy.lazy`), demanding `other` up front:
 * - on-demand CDS through Envoy's `on_demand` HTTP filter (`odcds` over ADS, added by a --config-yaml
 *   listener whose route names its cluster by a header): the first request to `web`, which Envoy does
 *   not hold, subscribes it on the CDS stream, the Cluster and its LEDS members arrive, and it is answered;
 * - the legacy wildcard survives that subscription: a demanded service created afterwards still arrives;
 * - re-subscribe: `web` deleted and re-created is discovered again by the next request;
 * - a reconnect after a Cluster change (Canopy restarted on the same port and store with the change in
 *   its config file): Envoy takes the updated Cluster, warms it and routes with no failed request, and
 *   whether LEDS members were sent again is read from Envoy's log.
 */
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { after, before, describe, it } from 'node:test';
import { dump, load } from 'js-yaml';
import { startCanopyProcess, type CanopyProcess } from './support/canopy-process.js';
import { EnvoyProcess, envoySkip, explainFailure } from './support/envoy-process.js';
import { failures, sendRequests, startHttpBackend, steadyTraffic, type HttpBackend } from './support/http-backends.js';

type Obj = Record<string, unknown>;
const skip = envoySkip();
const ODCDS = '127.0.68.1:20084';

/** A listener the test adds: its route takes the cluster from a header, and on_demand fetches a missing one. */
const onDemandListener = {
  name: 'odcds',
  address: { socket_address: { address: '127.0.68.1', port_value: 20084 } },
  filter_chains: [
    {
      filters: [
        {
          name: 'envoy.filters.network.http_connection_manager',
          typed_config: {
            '@type':
              'type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager',
            stat_prefix: 'odcds',
            route_config: {
              virtual_hosts: [
                {
                  name: 'any',
                  domains: ['*'],
                  routes: [{ match: { prefix: '/' }, route: { cluster_header: 'x-canopy-cluster' } }],
                },
              ],
            },
            http_filters: [
              {
                name: 'envoy.filters.http.on_demand',
                typed_config: {
                  '@type': 'type.googleapis.com/envoy.extensions.filters.http.on_demand.v3.OnDemand',
                  odcds: { source: { ads: {}, resource_api_version: 'V3' }, timeout: '5s' },
                },
              },
              {
                name: 'envoy.filters.http.router',
                typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.http.router.v3.Router' },
              },
            ],
          },
        },
      ],
    },
  ],
};

async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise((r) => s.close(r));
  return port;
}

describe('real Envoy on delta: on-demand CDS, the wildcard, re-subscribe, reconnect', { skip }, () => {
  let canopy: CanopyProcess;
  let envoy: EnvoyProcess;
  const backends: HttpBackend[] = [];
  let xdsPort = 0;
  let dataDir = '';
  const service = (name: string, b: HttpBackend, extra: Obj = {}) => ({
    name,
    port: 8080,
    protocol: 'http',
    endpoints: [{ address: b.host, port: b.port, locality: { region: 'r1', zone: 'z1', subzone: 's1' } }],
    ...extra,
  });
  const ask = (cluster: string, n = 1) =>
    sendRequests(ODCDS, n, { concurrency: 1, headers: { 'x-canopy-cluster': cluster } });
  const clusters = async () => (await envoy.clusters()).map((c) => c.name);

  before(async () => {
    for (const h of ['127.0.69.1', '127.0.69.2', '127.0.69.3']) backends.push(await startHttpBackend(h));
    xdsPort = await freePort();
    dataDir = `${process.env['TMPDIR'] ?? '/tmp'}/canopy-envoy-delta-${process.pid}`;
    canopy = await startCanopyProcess(
      { server: { debounceMs: 20 }, services: [service('web', backends[0]!), service('other', backends[1]!)] },
      ['--xds-port', String(xdsPort), '--data-dir', dataDir],
    );
    envoy = await EnvoyProcess.start({
      xds: `127.0.0.1:${xdsPort}`,
      nodeId: 'delta-odcds',
      locality: { region: 'r1', zone: 'z1', subzone: 's1' },
      outboundAddress: '127.0.68.2',
      metadata: { 'canopy.lazy': 'true', 'canopy.demand': 'other,third' },
      overlay: { static_resources: { listeners: [onDemandListener] } },
    });
  });
  after(async () => {
    await envoy?.stop();
    await canopy?.stop();
    await Promise.all(backends.map((b) => b.close()));
  });

  it('lazy: only the demanded service at first; the first request to web discovers it on demand', () =>
    explainFailure(
      () => [envoy],
      async () => {
        assert.deepEqual(
          (await clusters()).filter((n) => n !== 'canopy'),
          ['other'],
        );
        const t0 = Date.now();
        const t = await ask('web');
        const ms = Date.now() - t0;
        assert.deepEqual([...t.by], [['127.0.69.1', 1]], JSON.stringify([...t.failed]));
        console.log(`# first request to an on-demand cluster answered in ${ms} ms (loaded machine)`);
        assert.ok((await clusters()).includes('web'));
        assert.ok((await envoy.stat('cluster_manager.cds.update_success'))! >= 2);
        assert.ok((await envoy.stat('cluster.web.leds.update_success'))! >= 1, 'web endpoints came over LEDS');
      },
    ));

  it('the legacy wildcard survives the on-demand subscription: a demanded service created later arrives', () =>
    explainFailure(
      () => [envoy],
      async () => {
        const put = await canopy.admin('PUT', '/api/v1/services/third', service('third', backends[2]!));
        assert.equal(put.status, 201, JSON.stringify(put.body));
        await envoy.until(async () => (await clusters()).includes('third'), 30_000, 'cluster third over the wildcard');
        const t = await ask('third', 5);
        assert.deepEqual([...t.by], [['127.0.69.3', 5]], JSON.stringify([...t.failed]));
        // And web, held by the on-demand subscription, follows its changes.
        await canopy.admin('PUT', '/api/v1/services/web', service('web', backends[0]!, { connectTimeoutMs: 2200 }));
        await envoy.until(
          async () => JSON.stringify(await envoy.configDump()).includes('"connect_timeout":"2.200s"'),
          30_000,
          'web updated',
        );
      },
    ));

  it('re-subscribe: web deleted and re-created is discovered again by the next request', () =>
    explainFailure(
      () => [envoy],
      async () => {
        assert.equal((await canopy.admin('DELETE', '/api/v1/services/web')).status, 204);
        await envoy.until(async () => !(await clusters()).includes('web'), 30_000, 'web removed');
        // Envoy keeps the name in its on-demand subscription (a later request subscribes nothing new):
        // Canopy pushes the re-created Cluster to it unasked.
        assert.equal((await canopy.admin('PUT', '/api/v1/services/web', service('web', backends[0]!))).status, 201);
        await envoy.until(async () => (await clusters()).includes('web'), 30_000, 'web pushed again');
        assert.deepEqual([...(await ask('web')).by], [['127.0.69.1', 1]]);
      },
    ));

  it('a reconnect after a Cluster change: updated, warm, no failed request; LEDS members re-sent or not', () =>
    explainFailure(
      () => [envoy],
      async () => {
        const mesh = load(readFileSync(canopy.configPath, 'utf8')) as { services: Obj[] };
        for (const s of mesh.services) if (s['name'] === 'other') s['connectTimeoutMs'] = 3300;
        const ledsLines = () =>
          envoy
            .logTail(5000)
            .split('\n')
            .filter((l) => l.includes('leds.cc'));
        const traffic = steadyTraffic(ODCDS, { headers: { 'x-canopy-cluster': 'other' }, concurrency: 1 });
        try {
          await canopy.stop();
          writeFileSync(canopy.configPath, dump(mesh));
          const ledsBefore = ledsLines().length;
          await new Promise((r) => setTimeout(r, 300));
          canopy = await startCanopyProcess({}, ['--xds-port', String(xdsPort), '--data-dir', dataDir], {
            configFile: canopy.configPath,
          });
          await envoy.until(
            async () =>
              JSON.stringify(await envoy.configDump()).includes('"connect_timeout":"3.300s"') &&
              (await envoy.stat('cluster_manager.warming_clusters')) === 0,
            30_000,
            'other updated and warm after the reconnect',
          );
          // The updated cluster is a new EDS cluster with its own LEDS watches: without its members it stays warming.
          // Envoy logs the members as it applies them: wait for the line rather than for a moment.
          await envoy.until(
            () =>
              ledsLines()
                .slice(ledsBefore)
                .some((l) => l.includes('] other: add')),
            30_000,
            'the updated cluster got its LEDS members',
          );
          const resent = ledsLines().slice(ledsBefore);
          console.log(
            `# after the reconnect Envoy logged ${resent.length} LEDS member update(s):\n#   ${resent.join('\n#   ')}`,
          );
        } finally {
          const t = await traffic.stop();
          console.log(`# through the restart: ${t.sent} requests, ${failures(t)} failed`);
          assert.equal(failures(t), 0, JSON.stringify([...t.failed]));
        }
        assert.equal(await envoy.stat('control_plane.connected_state'), 1);
        assert.deepEqual([...(await envoy.initFetchTimeouts())], []);
        assert.deepEqual([...(await envoy.rejected())], []);
      },
    ));
});
