/**
 * `npm run bench:lazy` (third part): the latency a lazy sidecar adds to the first request to a service it
 * does not hold yet. One `canopy serve` with N HTTP services of 5 endpoints (as bench/lazy-envoy.ts: about
 * 900 and 10,000 endpoints); two real Envoy 1.40 sidecars bootstrapped by `canopy bootstrap envoy` (delta
 * ADS, LEDS), each with the same extra listener: its route takes the cluster from a header and Envoy's
 * `on_demand` HTTP filter fetches a missing one over ADS (on-demand CDS). The full sidecar holds every
 * cluster; the lazy one (`canopy.lazy: true`) holds one declared service and asks for the rest on demand.
 *
 * For each of SAMPLES services spread over the mesh (their endpoints real HTTP backends on loopback), the
 * first request through each sidecar on a new connection, the two interleaved (the order alternates): the
 * full sidecar's is the same work (new connection, route, new upstream connection, answer) minus the
 * on-demand fetch and the cluster's warming (its EDS/LEDS round trips). Every sample must be a 200 from a
 * backend. Printed: the medians with their spread, the ratio and the difference of the medians (the
 * added milliseconds), and the median of the per-pair differences.
 */
import http from 'node:http';
import os from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { startCanopyProcess, type CanopyProcess } from '../e2e/support/canopy-process.js';
import { EnvoyProcess, findEnvoy } from '../e2e/support/envoy-process.js';
import { startHttpBackend, type HttpBackend } from '../e2e/support/http-backends.js';
import { median } from './data.js';
import { ratio, show, spread } from './stats.js';

const SIZES = (process.env['LAZY_ENVOY_SERVICES'] ?? '180,2000').split(',').map(Number);
const SAMPLES = Number(process.env['LAZY_FIRST_SAMPLES'] ?? 24);
const ENDPOINTS = 5;
const REGIONS = ['us-east', 'eu-west', 'ap-south'];
const GOAL_MS = 50;
const LISTENER_PORT = 20090;
const FULL_AT = '127.0.98.1';
const LAZY_AT = '127.0.98.2';

const serviceName = (i: number) => `svc-${i}`;
const localityOf = (k: number) => ({ region: REGIONS[k % 3]!, zone: `${REGIONS[k % 3]!}-1a`, subzone: 'rack1' });

/** The services sampled (spread over the mesh) and the one the lazy sidecar declares (warm-up). */
function picks(n: number): { sampled: number[]; warm: number } {
  const sampled = Array.from({ length: SAMPLES }, (_, j) => Math.floor(((j + 0.5) * n) / SAMPLES));
  return { sampled, warm: sampled[0]! + 1 };
}

function meshConfig(n: number, real: ReadonlySet<number>, backends: readonly HttpBackend[]): object {
  const endpoint = (i: number, k: number) =>
    real.has(i)
      ? { address: backends[k]!.host, port: backends[k]!.port, locality: localityOf(k) }
      : { address: `10.${100 + k}.${(i >> 8) & 255}.${i & 255}`, port: 8080, locality: localityOf(k) };
  return {
    // Lazy xDS is asked for by the lazy sidecar's own metadata; the server's settings are the defaults.
    server: {},
    services: Array.from({ length: n }, (_, i) => ({
      name: serviceName(i),
      port: 8080,
      outboundPort: 15080,
      protocol: 'http',
      loadBalancing: { mode: 'failover', routingPreference: ['region', 'zone', 'subzone'] },
      endpoints: Array.from({ length: ENDPOINTS }, (_, k) => endpoint(i, k)),
    })),
  };
}

/** The extra listener both sidecars get: the cluster named by a header, on_demand fetching a missing one. */
function onDemandListener(address: string): object {
  const hcm = {
    '@type': 'type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager',
    stat_prefix: 'first',
    route_config: {
      virtual_hosts: [
        { name: 'any', domains: ['*'], routes: [{ match: { prefix: '/' }, route: { cluster_header: 'x-cluster' } }] },
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
  };
  return {
    name: 'first-request',
    address: { socket_address: { address, port_value: LISTENER_PORT } },
    filter_chains: [{ filters: [{ name: 'envoy.filters.network.http_connection_manager', typed_config: hcm }] }],
  };
}

/** One request on a new connection: its status, body and milliseconds to the end of the answer. */
function firstRequest(at: string, cluster: string): Promise<{ status: number; body: string; ms: number }> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const req = http.request(
      { host: at, port: LISTENER_PORT, path: '/', agent: false, headers: { 'x-cluster': cluster }, timeout: 10_000 },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => (body += d));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body, ms: performance.now() - t0 }));
      },
    );
    req.on('timeout', () => req.destroy(new Error(`no answer from ${at} for ${cluster} in 10 s`)));
    req.on('error', reject);
    req.end();
  });
}

async function answered(at: string, cluster: string, backendIds: ReadonlySet<string>): Promise<number> {
  const r = await firstRequest(at, cluster);
  if (r.status !== 200 || !backendIds.has(r.body))
    throw new Error(`first request to ${cluster} through ${at} failed: ${r.status} ${r.body.slice(0, 200)}`);
  return r.ms;
}

/** Waits until the sidecar holds `clusters` active clusters and its xDS updates stopped for a second. */
async function settled(envoy: EnvoyProcess, clusters: number): Promise<void> {
  const updates = async () => {
    let u = 0;
    for (const [k, v] of await envoy.stats()) if (k.endsWith('.update_success')) u += Number(v);
    return u;
  };
  let last = -1;
  const deadline = Date.now() + 180_000;
  for (;;) {
    const now = await updates();
    if (now === last && ((await envoy.stat('cluster_manager.active_clusters')) ?? 0) >= clusters) return;
    if (Date.now() > deadline) throw new Error(`${envoy.nodeId} did not settle`);
    last = now;
    await sleep(1000);
  }
}

interface Samples {
  readonly full: number[];
  readonly lazy: number[];
}

async function measure(n: number): Promise<Samples> {
  const backends: HttpBackend[] = [];
  let canopy: CanopyProcess | undefined;
  const envoys: EnvoyProcess[] = [];
  try {
    for (let k = 0; k < ENDPOINTS; k++) backends.push(await startHttpBackend(`127.0.97.${k + 1}`));
    const ids = new Set(backends.map((b) => b.id));
    const { sampled, warm } = picks(n);
    canopy = await startCanopyProcess(meshConfig(n, new Set([...sampled, warm]), backends), [
      '--admin-write-limit',
      '100000',
    ]);
    const xds = canopy.xdsUri.replace(/^.*:\/\//, '');
    const sidecar = (mode: 'full' | 'lazy', at: string) =>
      EnvoyProcess.start({
        xds,
        nodeId: `first-${mode}-${n}`,
        locality: { region: 'us-east', zone: 'us-east-1a', subzone: 'rack1' },
        outboundAddress: mode === 'full' ? '127.0.98.11' : '127.0.98.12',
        metadata: mode === 'lazy' ? { 'canopy.lazy': 'true', 'canopy.demand': serviceName(warm) } : {},
        overlay: { static_resources: { listeners: [onDemandListener(at)] } },
      });
    const full = await sidecar('full', FULL_AT);
    envoys.push(full);
    const lazy = await sidecar('lazy', LAZY_AT);
    envoys.push(lazy);
    await settled(full, n + 1);
    await settled(lazy, 2);
    // Warm-up: each sidecar's first connection on the listener and to a backend, through a held cluster.
    await answered(FULL_AT, serviceName(warm), ids);
    await answered(LAZY_AT, serviceName(warm), ids);
    const out: Samples = { full: [], lazy: [] };
    for (const [j, i] of sampled.entries()) {
      const order = j % 2 === 0 ? (['full', 'lazy'] as const) : (['lazy', 'full'] as const);
      for (const mode of order)
        out[mode].push(await answered(mode === 'full' ? FULL_AT : LAZY_AT, serviceName(i), ids));
      await sleep(50);
    }
    const odcds = await lazy.stat('cluster_manager.odcds.update_success');
    if (odcds === undefined || odcds < SAMPLES)
      process.stdout.write(`  (cluster_manager.odcds.update_success on the lazy sidecar: ${odcds})\n`);
    return out;
  } finally {
    for (const e of envoys.reverse()) await e.stop();
    await canopy?.stop();
    await Promise.all(backends.map((b) => b.close()));
  }
}

const { bin, reason } = findEnvoy();
if (!bin) {
  process.stdout.write(`\nFirst request to an on-demand service: skipped (${reason})\n`);
} else {
  process.stdout.write(
    `\nFirst request to an on-demand service, real Envoy (${bin.split('/').slice(-3).join('/')}): ${SAMPLES} ` +
      'services each, full and lazy interleaved, every sample a 200; ms: median (min–max)\n',
  );
  process.stdout.write(
    'services × endpoints | full: first request | lazy: first request (on demand) | ratio | added (medians) | added (median of pairs) | goal < 50 ms | load average\n',
  );
  for (const n of SIZES) {
    const loadBefore = os.loadavg()[0]!;
    const s = await measure(n);
    const load = `${loadBefore.toFixed(1)} → ${os.loadavg()[0]!.toFixed(1)} on ${os.cpus().length} cores`;
    const full = spread(s.full);
    const lazy = spread(s.lazy);
    const added = median(s.lazy) - median(s.full);
    const pairs = median(s.lazy.map((v, i) => v - s.full[i]!));
    process.stdout.write(
      `${n} × ${ENDPOINTS} | ${show(full)} | ${show(lazy)} | ${ratio(lazy, full)}× | ${added.toFixed(1)} | ` +
        `${pairs.toFixed(1)} | ${added < GOAL_MS ? 'met' : 'missed'} | ${load}\n`,
    );
  }
}
