/**
 * Warming on real Envoy 1.40: each Cluster and Listener change of a service (protocol, connect timeout,
 * outlier detection, health check, the listener's filter chain, a delete and re-create) is made through
 * the admin API while requests flow through three Envoys — SotW, delta with full CLAs, delta with LEDS —
 * bootstrapped by `canopy bootstrap envoy`. Envoy keeps an updated Cluster warming until its
 * ClusterLoadAssignment (and LEDS members) arrive and a Listener until its RouteConfiguration does; a
 * server that stayed silent would leave it there for initial_fetch_timeout (15 s). Checked: each change
 * is active in Envoy with nothing warming well before that, no request fails, no init_fetch_timeout or
 * update_rejected is counted, and once settled no more xDS updates arrive (no resend loop).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startCanopyProcess, type CanopyProcess } from './support/canopy-process.js';
import { EnvoyProcess, envoySkip, explainFailure } from './support/envoy-process.js';
import { failures, startHttpBackend, steadyTraffic, type HttpBackend, type Tally } from './support/http-backends.js';

type Obj = Record<string, unknown>;
const skip = envoySkip();
const PORT = 20082;
/** Well under Envoy's initial_fetch_timeout (15 s): a server that stays silent fails here. */
const WARM_MS = 5000;
const ENVOYS: [string, string, object][] = [
  ['warm-sotw', '127.0.67.1', { ads: 'sotw' }],
  ['warm-delta', '127.0.67.2', { metadata: { 'canopy.leds': 'false' } }],
  ['warm-leds', '127.0.67.3', {}],
];

/** The service's Cluster as Envoy holds it active (undefined while absent or only warming). */
function activeCluster(dump: Obj): Obj | undefined {
  for (const c of dump['configs'] as Obj[])
    for (const a of (c['dynamic_active_clusters'] as Obj[] | undefined) ?? []) {
      const cluster = a['cluster'] as Obj;
      if (cluster['name'] === 'web') return cluster;
    }
  return undefined;
}

function activeListener(dump: Obj): Obj | undefined {
  for (const c of dump['configs'] as Obj[])
    for (const l of (c['dynamic_listeners'] as Obj[] | undefined) ?? [])
      if (l['name'] === 'web' && l['active_state'] && !l['warming_state'])
        return (l['active_state'] as Obj)['listener'] as Obj;
  return undefined;
}

const json = (x: unknown) => JSON.stringify(x ?? null);
/** Each change (applied on top of the ones before), and how to see it in Envoy's active config. */
const CHANGES: [string, Obj, (cluster: Obj, listener: Obj) => boolean][] = [
  ['protocol grpc (HTTP/2 upstream)', { protocol: 'grpc' }, (c) => json(c).includes('http2_protocol_options')],
  ['protocol http again', { protocol: 'http' }, (c) => !json(c).includes('http2_protocol_options')],
  ['connectTimeoutMs', { connectTimeoutMs: 2500 }, (c) => c['connect_timeout'] === '2.500s'],
  ['outlierDetection', { outlierDetection: { consecutive5xx: 3 } }, (c) => c['outlier_detection'] !== undefined],
  [
    'healthCheck',
    { healthCheck: { path: '/healthz', intervalMs: 1000 } },
    (c) => json(c['health_checks']).includes('/healthz'),
  ],
  ['listener: protocol tcp (tcp_proxy filter chain)', { protocol: 'tcp' }, (_c, l) => json(l).includes('tcp_proxy')],
  [
    'listener: protocol http (HTTP connection manager)',
    { protocol: 'http' },
    (_c, l) => json(l).includes('http_connection_manager'),
  ],
];

describe('real Envoy: Cluster and Listener changes under steady traffic', { skip }, () => {
  let canopy: CanopyProcess;
  const backends: HttpBackend[] = [];
  const envoys: EnvoyProcess[] = [];
  let spec: Obj;

  before(async () => {
    for (const h of ['127.0.66.1', '127.0.66.2']) backends.push(await startHttpBackend(h));
    spec = {
      port: 8080,
      outboundPort: PORT,
      protocol: 'http',
      endpoints: backends.map((b, i) => ({
        address: b.host,
        port: b.port,
        locality: { region: 'r1', zone: `z${i + 1}`, subzone: 's1' },
      })),
    };
    // 100 ms of debounce: a change after a quiet spell goes at once, but a deletion waits for it, so a
    // delete and a re-create sent back to back reach Envoy as one push.
    canopy = await startCanopyProcess({ server: { debounceMs: 100 }, services: [{ name: 'web', ...spec }] });
    const xds = canopy.xdsUri.replace(/^.*:\/\//, '');
    for (const [nodeId, outboundAddress, extra] of ENVOYS)
      envoys.push(
        await EnvoyProcess.start({ xds, nodeId, outboundAddress, locality: { region: 'r1', zone: 'z1' }, ...extra }),
      );
  });
  after(async () => {
    await Promise.all(envoys.map((e) => e.stop()));
    await canopy?.stop();
    await Promise.all(backends.map((b) => b.close()));
  });

  async function settled(e: EnvoyProcess, see: (c: Obj, l: Obj) => boolean): Promise<boolean> {
    const warming =
      (await e.stat('cluster_manager.warming_clusters')) !== 0 ||
      (await e.stat('listener_manager.total_listeners_warming')) !== 0;
    if (warming) return false;
    const dump = await e.configDump();
    const [c, l] = [activeCluster(dump), activeListener(dump)];
    return c !== undefined && l !== undefined && see(c, l);
  }

  it('every change is active with nothing warming within seconds, and no request fails', () =>
    explainFailure(
      () => envoys,
      async () => {
        for (const e of envoys) await e.until(() => settled(e, () => true), WARM_MS, 'initial sync');
        const traffic = envoys.map((_, i) => steadyTraffic(`${ENVOYS[i]![1]}:${PORT}`, { maxMs: 60_000 }));
        try {
          await changes(traffic);
        } finally {
          await Promise.all(traffic.map((t) => t.stop()));
        }
      },
    ));

  async function changes(traffic: ReturnType<typeof steadyTraffic>[]): Promise<void> {
    const times: string[] = [];
    for (const [what, change, see] of CHANGES) {
      spec = { ...spec, ...change };
      const put = await canopy.admin('PUT', '/api/v1/services/web', spec);
      assert.equal(put.status, 200, JSON.stringify(put.body));
      const ms = await Promise.all(envoys.map((e) => e.until(() => settled(e, see), WARM_MS, what)));
      times.push(`${what}: ${ms.join(' / ')} ms (${new Date().toISOString().slice(17, 23)})`);
    }
    // A delete and a re-create within one debounce: Envoy sees the Cluster and Listener replaced.
    const versions = await Promise.all(envoys.map((e) => e.stat('cluster_manager.cds.update_success')));
    assert.equal((await canopy.admin('DELETE', '/api/v1/services/web')).status, 204);
    spec = { ...spec, connectTimeoutMs: 1500 };
    assert.equal((await canopy.admin('PUT', '/api/v1/services/web', spec)).status, 201);
    const ms = await Promise.all(
      envoys.map((e, i) =>
        e.until(
          async () =>
            (await e.stat('cluster_manager.cds.update_success'))! > versions[i]! &&
            (await settled(e, (c) => c['connect_timeout'] === '1.500s')),
          WARM_MS,
          're-creation',
        ),
      ),
    );
    times.push(`delete + re-create: ${ms.join(' / ')} ms`);
    const tallies: Tally[] = await Promise.all(traffic.map((t) => t.stop()));
    console.log(
      `# time to active with nothing warming (SotW / delta / LEDS), loaded machine:\n#   ${times.join('\n#   ')}`,
    );
    tallies.forEach((t, i) => {
      console.log(`# ${envoys[i]!.nodeId}: ${t.sent} requests, ${failures(t)} failed`);
      assert.ok(t.sent > 100, `${envoys[i]!.nodeId}: traffic flowed (${t.sent})`);
      assert.equal(failures(t), 0, `${envoys[i]!.nodeId}: ${JSON.stringify([...t.failed])}`);
    });
  }

  it('quiet once warm: no further xDS updates, no init_fetch_timeout, no update_rejected', () =>
    explainFailure(
      () => envoys,
      async () => {
        const attempts = async (e: EnvoyProcess) => [...(await e.stats('update_attempt$')).values()].map(Number);
        const before = await Promise.all(envoys.map(attempts));
        await new Promise((r) => setTimeout(r, 600));
        const later = await Promise.all(envoys.map(attempts));
        assert.deepEqual(later, before, 'no xDS update arrived once warm');
        for (const e of envoys) {
          assert.deepEqual([...(await e.initFetchTimeouts())], [], `${e.nodeId}: init_fetch_timeout`);
          assert.deepEqual([...(await e.rejected())], [], `${e.nodeId}: update_rejected`);
        }
      },
    ));
});
