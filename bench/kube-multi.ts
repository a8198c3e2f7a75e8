/**
 * `npm run bench:kube-multi`: what each remote cluster costs Canopy (issue 42).
 * N real kube-apiservers (each its own etcd; e2e/support/kube-apiserver.ts),
 * each with S Services of E endpoints (one EndpointSlice each, the same
 * Service names in every cluster, so each Canopy service is the union of N
 * clusters' endpoints). One `canopy serve --kube-clusters FILE` process (its
 * own process, so its RSS is its own) starts with one cluster; clusters are
 * added to the file one by one, and after each, once every service holds every
 * cluster's endpoints and a quiet spell has passed: Canopy's RSS (median of 5
 * reads of /proc over ~1 s), its JS heap in use (its /metrics), and
 * the CPU seconds it spent taking the cluster in. Then, with one cluster and
 * with N, readiness flips in one cluster: the time from the API call to the
 * CLA carrying it at a raw ADS client, and Canopy's CPU per flip.
 *
 *   npm run bench:kube-multi -- [--clusters=N] [--services=S] [--endpoints=E] [--flips=F]
 *   [--settle-ms=MS]
 *   (defaults 5 × 100 × 40, 20 flips, 10 s quiet before each RSS read)
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

const EDS = 'type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment';
const arg = (name: string, d: number) =>
  Number(process.argv.find((a) => a.startsWith(`--${name}=`))?.split('=')[1] ?? d);
const N = arg('clusters', 5);
const S = arg('services', 100);
const E = arg('endpoints', 40);
const FLIPS = arg('flips', 20);
const SETTLE_MS = arg('settle-ms', 10_000);

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

/** After a quiet spell (V8's memory reducer returns the list bursts' garbage pages after some seconds idle). */
async function steadyRss(pid: number): Promise<number> {
  await sleep(SETTLE_MS);
  const xs: number[] = [];
  for (let i = 0; i < 5; i++) {
    xs.push(usage(pid).rssMb);
    await sleep(200);
  }
  return median(xs);
}

/** The JS heap in use (MB), from Canopy's own /metrics (prom-client's default nodejs_heap_size_used_bytes). */
async function heapUsed(c: CanopyProcess): Promise<number> {
  const text = (await c.admin('GET', '/metrics')).body as string;
  return Number(/^nodejs_heap_size_used_bytes (\S+)/m.exec(text)?.[1]) / 2 ** 20;
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

async function main(): Promise<void> {
  const skip = kubeSkip();
  if (skip) throw new Error(skip);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-bench-multi-'));
  const file = path.join(dir, 'clusters.yaml');
  const apis: KubeApiserver[] = [];
  const discoveries: DiscoveryV1Api[] = [];
  let canopy: CanopyProcess | undefined;
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
    const c = await startCanopyProcess({ services: [] }, ['--kube-clusters', file, '--debounce-ms', '0']);
    canopy = c;
    const holds = async (k: number) => {
      const r = await c.admin('GET', `/api/v1/clusters`);
      const cs = (r.body as { clusters?: { synced: boolean; endpoints: number }[] }).clusters ?? [];
      return cs.length === k && cs.every((x) => x.synced && x.endpoints === S * E);
    };
    await until('the first cluster', () => holds(1));
    const rows: string[] = [];
    let rss = await steadyRss(c.pid);
    let heap = await heapUsed(c);
    const start = { rss, heap };
    rows.push(`| 1 | ${rss.toFixed(0)} | – | ${heap.toFixed(0)} | – | – |`);
    const first = await flips(c, discoveries[0]!, 1);
    for (let k = 2; k <= N; k++) {
      const cpu0 = usage(c.pid).cpuS;
      list(k);
      await until(`cluster ${k}`, () => holds(k));
      const cpu = usage(c.pid).cpuS - cpu0;
      const next = await steadyRss(c.pid);
      const nextHeap = await heapUsed(c);
      rows.push(
        `| ${k} | ${next.toFixed(0)} | ${(next - rss).toFixed(1)} | ${nextHeap.toFixed(0)} | ${(nextHeap - heap).toFixed(1)} | ${cpu.toFixed(2)} |`,
      );
      rss = next;
      heap = nextHeap;
    }
    const last = await flips(c, discoveries[0]!, N);
    process.stdout.write(
      `${N} clusters × ${S} services × ${E} endpoints (each service the union of every cluster's), ` +
        `one canopy serve --kube-clusters process, real kube-apiservers:\n\n` +
        `| clusters | Canopy RSS MB | + RSS MB | JS heap used MB | + heap MB | CPU s to take it in |\n|---|---|---|---|---|---|\n` +
        `${rows.join('\n')}\n\n` +
        `per remote cluster, average: RSS ${((rss - start.rss) / Math.max(1, N - 1)).toFixed(1)} MB, ` +
        `JS heap ${((heap - start.heap) / Math.max(1, N - 1)).toFixed(1)} MB\n` +
        `one readiness flip in one cluster (${FLIPS} flips, API call → CLA at a raw ADS client): ` +
        `1 cluster p50 ${first.p50.toFixed(1)} ms, ${first.cpuMs.toFixed(1)} ms CPU; ` +
        `${N} clusters p50 ${last.p50.toFixed(1)} ms, ${last.cpuMs.toFixed(1)} ms CPU\n`,
    );
  } finally {
    await canopy?.stop();
    for (const a of apis) await a.destroy();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
