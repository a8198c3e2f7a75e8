/**
 * `npm run bench:kube-multi`: what each remote cluster costs Canopy (issue 42).
 * N real kube-apiservers (each its own etcd; e2e/support/kube-apiserver.ts),
 * each with S Services of E endpoints (one EndpointSlice each, the same
 * Service names in every cluster, so each Canopy service is the union of N
 * clusters' endpoints). One `canopy serve --kube-clusters FILE` process (its
 * own process, so its RSS is its own) starts with one cluster; clusters are
 * added to the file one by one, and after each, once every service holds every
 * cluster's endpoints and a quiet spell has passed: Canopy's RSS as it is,
 * then, after full garbage collections (through the child's inspector,
 * bench/inspector.ts), its RSS, JS heap in use and external memory, and the
 * CPU seconds it spent taking the cluster in. RSS read as it is moves by tens
 * of MB a step with where V8's collections fall; the per-cluster figures are
 * the least-squares slope over the steps of the collected readings, with the
 * median step and the spread of the steps. Then, with one cluster and with N,
 * readiness flips in one cluster: the time from the API call to the CLA
 * carrying it at a raw ADS client, and Canopy's CPU per flip.
 *
 *   npm run bench:kube-multi -- [--clusters=N] [--services=S] [--endpoints=E] [--flips=F]
 *   [--settle-ms=MS] [--snapshots=1,5]
 *   (defaults 5 × 100 × 40, 20 flips, 3 s quiet before each reading; --snapshots writes
 *   heap snapshots at those cluster counts, for a profile, and prints where)
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { CoreV1Api, DiscoveryV1Api, KubeConfig, type V1EndpointSlice } from '@kubernetes/client-node';
import { dump } from 'js-yaml';
import { startCanopyProcess, type CanopyProcess } from '../e2e/support/canopy-process.js';
import { kubeSkip, startKubeApiserver, type KubeApiserver } from '../e2e/support/kube-apiserver.js';
import { RawAdsStream, type RawResponse } from '../e2e/support/raw-ads.js';
import { decodeEnvoy } from '../e2e/support/raw-grpc-frames.js';
import { Inspector } from './inspector.js';

const EDS = 'type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment';
const arg = (name: string, d: number) =>
  Number(process.argv.find((a) => a.startsWith(`--${name}=`))?.split('=')[1] ?? d);
const N = arg('clusters', 5);
const S = arg('services', 100);
const E = arg('endpoints', 40);
const FLIPS = arg('flips', 20);
const SETTLE_MS = arg('settle-ms', 3_000);
const SNAPSHOTS = new Set(
  (process.argv.find((a) => a.startsWith('--snapshots='))?.split('=')[1] ?? '').split(',').filter(Boolean).map(Number),
);

function slice(c: number, s: number, unready: number): V1EndpointSlice {
  return {
    metadata: { name: `svc-${s}`, namespace: 'default', labels: { 'kubernetes.io/service-name': `svc-${s}` } },
    addressType: 'IPv4',
    ports: [{ name: 'http', port: 8080 }],
    endpoints: Array.from({ length: E }, (_, i) => ({
      addresses: [`10.${c}.${s}.${i + 1}`],
      conditions: { ready: i !== unready },
      nodeName: `node-${i % 3}`,
    })),
  };
}

/** RSS (MB) and CPU seconds (user + system) of a process, from /proc. */
function usage(pid: number): { rssMb: number; cpuS: number } {
  const rss = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const ticks = Number(fields[11]) + Number(fields[12]); // utime, stime (fields 14, 15), at USER_HZ 100
  return { rssMb: Number(rss) / 1024, cpuS: ticks / 100 };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const MB = 2 ** 20;
const rssNow = (pid: number) => usage(pid).rssMb;

interface Reading {
  /** RSS after the quiet spell, as it is (median of 5 reads of /proc over ~1 s). */
  readonly rawRss: number;
  /** After full collections: RSS (median of 5 reads), JS heap in use, external (Buffers and the like). */
  readonly rss: number;
  readonly heap: number;
  readonly external: number;
}

async function medianRss(pid: number): Promise<number> {
  const xs: number[] = [];
  for (let i = 0; i < 5; i++) {
    xs.push(rssNow(pid));
    await sleep(200);
  }
  return median(xs);
}

/** After a quiet spell (V8's memory reducer returns the list bursts' garbage pages after some seconds idle). */
async function reading(pid: number, inspector: Inspector): Promise<Reading> {
  await sleep(SETTLE_MS);
  const rawRss = await medianRss(pid);
  const m = await inspector.collectedMemory();
  return { rawRss, rss: await medianRss(pid), heap: m.heapUsed / MB, external: m.external / MB };
}

/** Per added cluster: the least-squares slope of ys over 1..n, the median step and the steps' range. */
function perCluster(ys: readonly number[]): string {
  const n = ys.length;
  if (n < 2) return '–';
  const xm = (n + 1) / 2;
  const ym = ys.reduce((a, b) => a + b, 0) / n;
  let sxy = 0;
  let sxx = 0;
  ys.forEach((y, i) => {
    sxy += (i + 1 - xm) * (y - ym);
    sxx += (i + 1 - xm) ** 2;
  });
  const steps = ys.slice(1).map((y, i) => y - ys[i]!);
  const lo = Math.min(...steps);
  const hi = Math.max(...steps);
  return `${(sxy / sxx).toFixed(1)} MB (median step ${median(steps).toFixed(1)}, steps ${lo.toFixed(1)} to ${hi.toFixed(1)})`;
}

async function until(what: string, f: () => Promise<boolean>, ms = 300_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await f())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

function healthy(r: RawResponse): number {
  if (r.resources.length === 0) return 0;
  const cla = decodeEnvoy<{ endpoints: { lb_endpoints: { health_status: string }[] }[] }>(
    'envoy.config.endpoint.v3.ClusterLoadAssignment',
    r.resources[0]!.value,
  );
  let n = 0;
  for (const l of cla.endpoints) for (const e of l.lb_endpoints) if (e.health_status !== 'UNHEALTHY') n++;
  return n;
}

/** Flips of one endpoint in cluster 0's svc-0: API call → CLA at the client, and Canopy's CPU per flip. */
async function flips(canopy: CanopyProcess, discovery: DiscoveryV1Api, clusters: number) {
  const ads = new RawAdsStream(canopy.xdsUri);
  const ack = (r: RawResponse) =>
    ads.send({
      type_url: EDS,
      version_info: r.version_info,
      response_nonce: r.nonce,
      resource_names: ['svc-0.default'],
    });
  try {
    ads.send({ node: { id: 'bench', cluster: 'bench' }, type_url: EDS, resource_names: ['svc-0.default'] });
    let r = await ads.next(30_000);
    while (healthy(r) !== clusters * E) {
      ack(r);
      r = await ads.next(30_000);
    }
    ack(r);
    const times: number[] = [];
    const cpu0 = usage(canopy.pid).cpuS;
    for (let i = 0; i < FLIPS; i++) {
      const flipped = i % 2 === 0;
      const t0 = performance.now();
      await discovery.replaceNamespacedEndpointSlice({
        name: 'svc-0',
        namespace: 'default',
        body: slice(0, 0, flipped ? i % E : -1),
      });
      const want = clusters * E - (flipped ? 1 : 0);
      do {
        r = await ads.next(30_000);
        ack(r);
      } while (healthy(r) !== want);
      times.push(performance.now() - t0);
    }
    return { p50: median(times), cpuMs: ((usage(canopy.pid).cpuS - cpu0) * 1000) / FLIPS };
  } finally {
    ads.close();
  }
}

/** Clusters 1..N, one by one; a reading after each (and a snapshot where asked); flips at 1 and at N. */
async function addClusters(
  c: CanopyProcess,
  inspector: Inspector,
  discoveries: readonly DiscoveryV1Api[],
  list: (k: number) => void,
): Promise<void> {
  const holds = async (k: number) => {
    const r = await c.admin('GET', `/api/v1/clusters`);
    const cs = (r.body as { clusters?: { synced: boolean; endpoints: number }[] }).clusters ?? [];
    return cs.length === k && cs.every((x) => x.synced && x.endpoints === S * E);
  };
  const readings: Reading[] = [];
  const rows: string[] = [];
  let first: Awaited<ReturnType<typeof flips>> | undefined;
  for (let k = 1; k <= N; k++) {
    const cpu0 = usage(c.pid).cpuS;
    if (k > 1) list(k);
    await until(`cluster ${k}`, () => holds(k));
    const cpu = usage(c.pid).cpuS - cpu0;
    const r = await reading(c.pid, inspector);
    const was = readings.at(-1);
    readings.push(r);
    const step = (f: (x: Reading) => number) => (was ? (f(r) - f(was)).toFixed(1) : '–');
    rows.push(
      `| ${k} | ${r.rawRss.toFixed(0)} | ${step((x) => x.rawRss)} | ${r.rss.toFixed(0)} | ${step((x) => x.rss)} | ` +
        `${r.heap.toFixed(1)} | ${step((x) => x.heap)} | ${r.external.toFixed(1)} | ${step((x) => x.external)} | ` +
        `${k === 1 ? '–' : cpu.toFixed(2)} |`,
    );
    if (SNAPSHOTS.has(k)) {
      const at = path.join(os.tmpdir(), `canopy-kube-multi-${k}-${process.pid}.heapsnapshot`);
      await inspector.snapshot(at);
      process.stderr.write(`heap snapshot at ${k} clusters: ${at}\n`);
    }
    if (k === 1) first = await flips(c, discoveries[0]!, 1);
  }
  const last = await flips(c, discoveries[0]!, N);
  const of = (f: (x: Reading) => number) => perCluster(readings.map(f));
  process.stdout.write(
    `${N} clusters × ${S} services × ${E} endpoints (each service the union of every cluster's), ` +
      `one canopy serve --kube-clusters process, real kube-apiservers, ${SETTLE_MS / 1000} s quiet before each ` +
      `reading, load average ${os.loadavg()[0]!.toFixed(1)}:\n\n` +
      `| clusters | RSS MB as it is | + | RSS MB after GC | + | JS heap used MB | + | external MB | + | ` +
      `CPU s to take it in |\n|---|---|---|---|---|---|---|---|---|---|\n` +
      `${rows.join('\n')}\n\n` +
      `per remote cluster (slope over the steps, after full GC): RSS ${of((x) => x.rss)}; ` +
      `JS heap ${of((x) => x.heap)}; external ${of((x) => x.external)}; RSS as it is ${of((x) => x.rawRss)}\n` +
      `one readiness flip in one cluster (${FLIPS} flips, API call → CLA at a raw ADS client): ` +
      `1 cluster p50 ${first!.p50.toFixed(1)} ms, ${first!.cpuMs.toFixed(1)} ms CPU; ` +
      `${N} clusters p50 ${last.p50.toFixed(1)} ms, ${last.cpuMs.toFixed(1)} ms CPU\n`,
  );
}

async function main(): Promise<void> {
  const skip = kubeSkip();
  if (skip) throw new Error(skip);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-bench-multi-'));
  const file = path.join(dir, 'clusters.yaml');
  const apis: KubeApiserver[] = [];
  const discoveries: DiscoveryV1Api[] = [];
  let canopy: CanopyProcess | undefined;
  let inspector: Inspector | undefined;
  try {
    for (let c = 0; c < N; c++) {
      const api = await startKubeApiserver();
      apis.push(api);
      const kc = new KubeConfig();
      kc.loadFromFile(api.kubeconfig());
      const core = kc.makeApiClient(CoreV1Api);
      const discovery = kc.makeApiClient(DiscoveryV1Api);
      discoveries.push(discovery);
      for (let z = 0; z < 3; z++)
        await core.createNode({
          body: { metadata: { name: `node-${z}`, labels: { 'topology.kubernetes.io/zone': `c${c}-z${z}` } } },
        });
      for (let s = 0; s < S; s++) {
        await core.createNamespacedService({
          namespace: 'default',
          body: { metadata: { name: `svc-${s}` }, spec: { ports: [{ name: 'http', port: 80 }] } },
        });
        await discovery.createNamespacedEndpointSlice({ namespace: 'default', body: slice(c, s, -1) });
      }
      process.stderr.write(`cluster ${c}: ${S} services × ${E} endpoints written\n`);
    }
    const list = (k: number) =>
      writeFileSync(
        file,
        dump({
          clusters: apis.slice(0, k).map((a, c) => ({ name: `c${c}`, network: 'n1', kubeconfig: a.kubeconfig() })),
        }),
      );
    list(1);
    const c = await startCanopyProcess({ services: [] }, ['--kube-clusters', file, '--debounce-ms', '0'], {
      nodeArgs: ['--inspect=127.0.0.1:0'],
    });
    canopy = c;
    inspector = await Inspector.attach(() => c.logs());
    await addClusters(c, inspector, discoveries, list);
  } finally {
    inspector?.close();
    await canopy?.stop();
    for (const a of apis) await a.destroy();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
