/**
 * `npm run bench:kube`: event → push latency of the Kubernetes source at
 * 10,000 endpoints. A real kube-apiserver and etcd (e2e/support/kube-apiserver.ts),
 * one Service with ten EndpointSlices of 1,000 endpoints, Canopy in this
 * process watching it, and a raw ADS client subscribed to the service's CLA.
 * Each sample replaces one slice with one endpoint's readiness flipped and
 * times from just before the API call to the CLA carrying the flip arriving
 * at the client: the API server's write and watch fan-out, the source's
 * mapping and store write, the mesh update and the push (debounce 0).
 *
 *   npm run bench:kube -- [--samples=N]   (default 40)
 */
import { performance } from 'node:perf_hooks';
import { DiscoveryV1Api, CoreV1Api, KubeConfig, type V1EndpointSlice } from '@kubernetes/client-node';
import { pino } from 'pino';
import { startCanopy } from '../server/src/main.js';
import { kubeApiserverPath, startKubeApiserver } from '../e2e/support/kube-apiserver.js';
import { RawAdsStream, type RawResponse } from '../e2e/support/raw-ads.js';
import { decodeEnvoy } from '../e2e/support/raw-grpc-frames.js';
import { existsSync } from 'node:fs';

const EDS = 'type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment';
const SLICES = 10;
const PER_SLICE = 1000;
const samples = Number(process.argv.find((a) => a.startsWith('--samples='))?.split('=')[1] ?? 40);

function slice(s: number, unready: number): V1EndpointSlice {
  return {
    metadata: { name: `big-${s}`, namespace: 'default', labels: { 'kubernetes.io/service-name': 'big' } },
    addressType: 'IPv4',
    ports: [{ name: 'http', port: 8080 }],
    endpoints: Array.from({ length: PER_SLICE }, (_, i) => ({
      addresses: [`10.${s}.${i >> 8}.${i & 255}`],
      conditions: { ready: i !== unready },
      nodeName: `node-${i % 3}`,
    })),
  };
}

function healthy(r: RawResponse): number {
  if (r.resources.length === 0) return 0; // not written yet
  const cla = decodeEnvoy<{ endpoints: { lb_endpoints: { health_status: string }[] }[] }>(
    'envoy.config.endpoint.v3.ClusterLoadAssignment',
    r.resources[0]!.value,
  );
  let n = 0;
  for (const l of cla.endpoints) for (const e of l.lb_endpoints) if (e.health_status !== 'UNHEALTHY') n++;
  return n;
}

async function main(): Promise<void> {
  if (!existsSync(kubeApiserverPath())) throw new Error(`build kube-apiserver first: e2e/support/kube/build.sh`);
  const api = await startKubeApiserver();
  const kc = new KubeConfig();
  kc.loadFromFile(api.kubeconfig());
  const core = kc.makeApiClient(CoreV1Api);
  const discovery = kc.makeApiClient(DiscoveryV1Api);
  for (let z = 0; z < 3; z++)
    await core.createNode({
      body: { metadata: { name: `node-${z}`, labels: { 'topology.kubernetes.io/zone': `z${z}` } } },
    });
  await core.createNamespacedService({
    namespace: 'default',
    body: { metadata: { name: 'big' }, spec: { ports: [{ name: 'http', port: 80 }] } },
  });
  for (let s = 0; s < SLICES; s++)
    await discovery.createNamespacedEndpointSlice({ namespace: 'default', body: slice(s, -1) });
  const canopy = await startCanopy({
    config: { services: [], server: {} },
    host: '127.0.0.1',
    xdsPort: 0,
    adminPort: 0,
    debounceMs: 0,
    logger: pino({ level: process.env['CANOPY_BENCH_LOG'] ?? 'silent' }),
    kube: { kubeconfig: api.kubeconfig() },
  });
  // Subscribed once the source has written the service (the first full sync).
  while (canopy.mesh.get('big.default')?.spec.endpoints.length !== SLICES * PER_SLICE)
    await new Promise((resolve) => setTimeout(resolve, 50));
  const ads = new RawAdsStream(canopy.xdsAddress);
  try {
    const node = { id: 'bench', cluster: 'bench', locality: { region: '', zone: 'z0', sub_zone: '' } };
    ads.send({ node, type_url: EDS, resource_names: ['big.default'] });
    let r = await ads.next(30_000);
    if (process.env['CANOPY_BENCH_LOG']) process.stderr.write(`initial: ${healthy(r)}\n`);
    while (healthy(r) !== SLICES * PER_SLICE) {
      if (process.env['CANOPY_BENCH_LOG']) process.stderr.write(`initial CLA: ${healthy(r)} endpoints\n`);
      ads.send({
        type_url: EDS,
        version_info: r.version_info,
        response_nonce: r.nonce,
        resource_names: ['big.default'],
      });
      r = await ads.next(30_000);
    }
    ads.send({ type_url: EDS, version_info: r.version_info, response_nonce: r.nonce, resource_names: ['big.default'] });
    const times: number[] = [];
    for (let i = 0; i < samples; i++) {
      // Even samples flip one endpoint of a slice; odd ones put it back.
      const s = Math.floor(i / 2) % SLICES;
      const flipped = i % 2 === 0;
      const t0 = performance.now();
      await discovery.replaceNamespacedEndpointSlice({
        name: `big-${s}`,
        namespace: 'default',
        body: slice(s, flipped ? i % PER_SLICE : -1),
      });
      const want = SLICES * PER_SLICE - (flipped ? 1 : 0);
      for (;;) {
        r = await ads.next(30_000);
        ads.send({
          type_url: EDS,
          version_info: r.version_info,
          response_nonce: r.nonce,
          resource_names: ['big.default'],
        });
        if (process.env['CANOPY_BENCH_LOG']) process.stderr.write(`sample ${i}: CLA ${healthy(r)}, want ${want}\n`);
        if (healthy(r) === want) break;
      }
      times.push(performance.now() - t0);
    }
    times.sort((a, b) => a - b);
    const q = (p: number) => times[Math.min(times.length - 1, Math.floor(p * times.length))]!.toFixed(1);
    const rss = Math.round(process.memoryUsage().rss / 2 ** 20);
    process.stdout.write(
      `kube source, ${SLICES * PER_SLICE} endpoints in ${SLICES} slices, ${samples} readiness flips ` +
        `(one slice of ${PER_SLICE} replaced each):\n` +
        `  event -> push: p50 ${q(0.5)} ms, p90 ${q(0.9)} ms, max ${q(1)} ms (RSS ${rss} MB, in-process Canopy + client)\n`,
    );
  } finally {
    ads.close();
    await canopy.stop();
    await api.destroy();
  }
}

await main();
