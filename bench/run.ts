/**
 * `npm run bench [-- --quick]`: Canopy's CLA generation against the ztunnel
 * rank loop and an Istio-style per-client computation, on the same data in
 * the same process. Every figure that matters is a ratio, because the
 * machines are shared and noisy. Writes bench/results/latest.json.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import { ClaCache } from '../server/src/domain/cla-cache.js';
import type { Placement } from '../server/src/domain/locality.js';
import { Mesh } from '../server/src/domain/mesh.js';
import type { Endpoint, ServiceSpec } from '../server/src/domain/service.js';
import { encodeCla } from '../server/src/xds/codec.js';
import { istioPerClient, localityGroups, rankLoop } from './baselines.js';

const quick = process.argv.includes('--quick');

interface Shape {
  readonly endpoints: number;
  readonly clients: number;
  readonly localities: number;
}

/** N endpoints over 3-level localities: 10 regions × 10 zones × up to 10 subzones. */
function makeEndpoints(n: number): Endpoint[] {
  const leaves = Math.max(1, Math.min(1000, Math.floor(n / 10)));
  return Array.from({ length: n }, (_, i) => {
    const leaf = i % leaves;
    return {
      address: `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`,
      port: 8080,
      locality: { region: `r${leaf % 10}`, zone: `z${Math.floor(leaf / 10) % 10}`, subzone: `s${Math.floor(leaf / 100)}` },
      network: '',
      node: '',
      cluster: '',
      labels: {},
      health: 'healthy' as const,
      weight: 1,
    };
  });
}

/** C clients over L distinct localities; a quarter of them match no subzone, a few no region. */
function makeClients(c: number, l: number): Placement[] {
  return Array.from({ length: c }, (_, i) => {
    const k = i % l;
    const region = k % 37 === 36 ? `rx${k}` : `r${k % 10}`;
    const zone = `z${Math.floor(k / 10) % 10}`;
    const subzone = k % 4 === 3 ? `sx${k}` : `s${Math.floor(k / 100) % 10}`;
    return { locality: { region, zone, subzone }, network: '', node: '', cluster: '', labels: {} };
  });
}

function cpu<T>(fn: () => T): { ms: number; value: T } {
  const start = process.cpuUsage();
  const value = fn();
  const used = process.cpuUsage(start);
  return { ms: (used.user + used.system) / 1000, value };
}

function claGeneration(shape: Shape) {
  const endpoints = makeEndpoints(shape.endpoints);
  const clients = makeClients(shape.clients, shape.localities);
  const spec: ServiceSpec = {
    name: 'svc',
    loadBalancing: { mode: 'failover', routingPreference: ['region', 'zone', 'subzone'], crossNetworkFailover: true, overprovisioningFactor: 140 },
    endpoints,
  };
  // Warm-up on a few clients, so neither side pays for JIT compilation in its figure.
  {
    const mesh = new Mesh();
    mesh.put(spec);
    const warm = new ClaCache(encodeCla);
    for (const c of clients.slice(0, 200)) warm.lookup(mesh.get('svc')!, c);
    for (const c of clients.slice(0, 20)) rankLoop(spec.loadBalancing.routingPreference, endpoints, c, encodeCla);
    const groups = localityGroups(endpoints);
    for (const c of clients.slice(0, 20)) istioPerClient(groups, c, encodeCla);
  }
  // The tree is the server's state, as the endpoint list is the baselines': built once per change, timed apart.
  const built = cpu(() => {
    const mesh = new Mesh();
    mesh.put(spec);
    return mesh.get('svc')!;
  });
  const state = built.value;
  let bytesCanopy = 0;
  const canopy = cpu(() => {
    const cache = new ClaCache(encodeCla);
    for (const c of clients) bytesCanopy += cache.lookup(state, c).bytes.length;
    return cache.stats().entries;
  });
  let bytesRank = 0;
  const rank = cpu(() => {
    for (const c of clients) bytesRank += rankLoop(spec.loadBalancing.routingPreference, endpoints, c, encodeCla).length;
  });
  // The Istio-style baseline is the slowest; past 2e7 client-endpoint pairs in --quick it runs on the
  // first 1,000 clients and is scaled to all of them (flagged in the output).
  const istioClients = quick && shape.clients * shape.endpoints > 2e7 ? clients.slice(0, 1000) : clients;
  let bytesIstio = 0;
  const istioSample = cpu(() => {
    const groups = localityGroups(endpoints);
    for (const c of istioClients) bytesIstio += istioPerClient(groups, c, encodeCla).length;
  });
  const istio = { ms: (istioSample.ms * clients.length) / istioClients.length };
  const pairs = shape.clients * shape.endpoints;
  return {
    ...shape,
    treeBuildMs: round(built.ms),
    canopyMs: round(canopy.ms),
    rankLoopMs: round(rank.ms),
    istioMs: round(istio.ms),
    istioScaledFrom: istioClients.length < clients.length ? istioClients.length : undefined,
    canopyNsPerEndpoint: round((canopy.ms * 1e6) / pairs, 3),
    rankLoopNsPerEndpoint: round((rank.ms * 1e6) / pairs, 3),
    istioNsPerEndpoint: round((istio.ms * 1e6) / pairs, 3),
    speedupVsRankLoop: round(rank.ms / canopy.ms, 1),
    speedupVsRankLoopWithTreeBuild: round(rank.ms / (canopy.ms + built.ms), 1),
    speedupVsIstio: round(istio.ms / canopy.ms, 1),
    cachedClas: canopy.value,
    bytesPerClient: {
      canopy: Math.round(bytesCanopy / shape.clients),
      rankLoop: Math.round(bytesRank / shape.clients),
      istio: Math.round(bytesIstio / istioClients.length),
    },
  };
}

function wireSize(n: number) {
  const endpoints = makeEndpoints(n);
  const mesh = new Mesh();
  mesh.put({
    name: 'svc',
    loadBalancing: { mode: 'random', routingPreference: ['region', 'zone', 'subzone'], crossNetworkFailover: true, overprovisioningFactor: 140 },
    endpoints,
  });
  const bytes = new ClaCache(encodeCla).lookup(mesh.get('svc')!, makeClients(1, 1)[0]!).bytes.length;
  return { endpoints: n, claBytes: bytes, claBytesPerEndpoint: round(bytes / n, 2) };
}

function round(x: number, digits = 2): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}

function shapes(): Shape[] {
  if (quick) {
    return [
      { endpoints: 1000, clients: 100, localities: 10 },
      { endpoints: 1000, clients: 1000, localities: 100 },
      { endpoints: 10000, clients: 1000, localities: 100 },
      { endpoints: 10000, clients: 10000, localities: 100 },
    ];
  }
  const out: Shape[] = [];
  for (const endpoints of [1000, 10000, 100000]) out.push({ endpoints, clients: 1000, localities: 100 });
  for (const clients of [100, 10000]) out.push({ endpoints: 10000, clients, localities: 100 });
  for (const localities of [10, 1000]) out.push({ endpoints: 10000, clients: 1000, localities });
  out.push({ endpoints: 10000, clients: 10000, localities: 1000 });
  return out;
}

const results = {
  machine: { cores: os.cpus().length, cpu: os.cpus()[0]?.model ?? '', memoryGiB: round(os.totalmem() / 2 ** 30, 1), node: process.version },
  mode: quick ? 'quick' : 'full',
  at: new Date().toISOString(),
  claGeneration: shapes().map(claGeneration),
  wireSize: (quick ? [1000, 10000] : [1000, 10000, 100000]).map(wireSize),
};

console.log(`machine: ${results.machine.cores} cores, ${results.machine.memoryGiB} GiB, Node ${results.machine.node} (${results.mode})`);
console.log('\nCLA generation (CPU ms; speedup = baseline CPU / Canopy CPU, same data, same process)');
console.table(
  results.claGeneration.map((r) => ({
    endpoints: r.endpoints,
    clients: r.clients,
    localities: r.localities,
    'canopy ms': r.canopyMs,
    'rank loop ms': r.rankLoopMs,
    'istio ms': r.istioMs,
    'ns/endpoint canopy': r.canopyNsPerEndpoint,
    'ns/endpoint rank': r.rankLoopNsPerEndpoint,
    'tree build ms': r.treeBuildMs,
    'x vs rank': r.speedupVsRankLoop,
    'x vs rank incl. build': r.speedupVsRankLoopWithTreeBuild,
    'x vs istio': r.istioScaledFrom ? `${r.speedupVsIstio} (scaled from ${r.istioScaledFrom})` : r.speedupVsIstio,
    'cached CLAs': r.cachedClas,
  })),
);
console.log('\nWire size (ClusterLoadAssignment, IPv4 endpoints)');
console.table(results.wireSize);

const dir = fileURLToPath(new URL('../../bench/results/', import.meta.url));
mkdirSync(dir, { recursive: true });
writeFileSync(`${dir}latest.json`, `${JSON.stringify(results, null, 2)}\n`);
console.log(`\nwrote bench/results/latest.json`);
