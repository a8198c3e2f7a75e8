/**
 * `npm run bench:store [-- --runs=5] [--latency-only]`: the store backends.
 *
 *   1. A 100k-endpoint service into each durable backend and back: the PUT
 *      (one atomic write), then a cold open that loads it (LevelDB: a new
 *      process's view of the data directory; etcd: a new client's range read).
 *   2. Replicas: a write through replica A's admin API until a raw ADS client
 *      on replica B holds the new version, 100 writes, p50/p99.
 *
 * etcd sections need Debian's etcd-server; without it they say so and skip.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { startCanopyProcess } from '../e2e/support/canopy-process.js';
import { hasEtcd, startEtcd, type EtcdProcess } from '../e2e/support/etcd-process.js';
import { RawAdsStream } from '../e2e/support/raw-ads.js';
import { EtcdStore } from '../server/src/store/etcd-store.js';
import { LevelJournal } from '../server/src/store/level-journal.js';
import { LocalStore } from '../server/src/store/local-store.js';
import type { Store } from '../server/src/store/store.js';
import { failoverService, makeEndpoints } from './data.js';

const runs = Number(process.argv.find((a) => a.startsWith('--runs='))?.slice('--runs='.length) ?? 5);
const latencyOnly = process.argv.includes('--latency-only');
const EDS = 'type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment';

function stats(xs: number[]) {
  const s = [...xs].sort((a, b) => a - b);
  const q = (p: number) => s[Math.min(s.length - 1, Math.floor(p * s.length))] ?? NaN;
  return { median: q(0.5), p99: q(0.99), min: s[0] ?? NaN, max: s[s.length - 1] ?? NaN };
}
const ms = (x: number) => `${x.toPrecision(2)} ms`;
const show = (what: string, xs: number[]) => {
  const st = stats(xs);
  console.log(`${what}: median ${ms(st.median)} (min ${ms(st.min)}, max ${ms(st.max)}, n=${xs.length})`);
};

async function loadBench(name: string, open: () => Promise<Store>, reopen: () => Promise<Store>): Promise<void> {
  const spec = failoverService('big', makeEndpoints(100_000));
  const put: number[] = [];
  const load: number[] = [];
  for (let r = 0; r < runs; r++) {
    const store = await open();
    // Alternate weights so every run writes every endpoint.
    const t0 = performance.now();
    await store.put({ ...spec, endpoints: spec.endpoints.map((e) => ({ ...e, weight: 1 + (r % 2) })) }, { owner: 'api' });
    put.push(performance.now() - t0);
    await store.close();
    const t1 = performance.now();
    const again = await reopen();
    const { services } = await again.list();
    load.push(performance.now() - t1);
    if (services[0]?.spec.endpoints.length !== 100_000) throw new Error(`${name}: reloaded ${services[0]?.spec.endpoints.length}`);
    await again.close();
  }
  show(`${name}: PUT of a 100k-endpoint service`, put);
  show(`${name}: cold load of it`, load);
}

async function replicaLatency(etcd: EtcdProcess): Promise<void> {
  const config = {
    server: { debounceMs: 20 },
    services: [{ name: 'echo', endpoints: makeEndpoints(100, 10).map((e) => ({ address: e.address, port: e.port, locality: e.locality })) }],
  };
  const prefix = `etcd://${etcd.endpoint}/bench-replicas-${Date.now()}/`;
  const a = await startCanopyProcess(config, ['--store', prefix]);
  const b = await startCanopyProcess(config, ['--store', prefix]);
  const ads = new RawAdsStream(b.xdsUri);
  try {
    ads.send({ type_url: EDS, node: { id: 'bench', locality: { region: 'r0', zone: 'z0', sub_zone: 's0' } }, resource_names: ['echo'] });
    let held = await ads.next(5000);
    const first = config.services[0]!.endpoints[0]!;
    const key = encodeURIComponent(`${first.address}:${first.port}`);
    const samples: number[] = [];
    for (let i = 0; i < 100; i++) {
      const t0 = performance.now();
      const res = await a.admin('PATCH', `/api/v1/services/echo/endpoints/${key}`, { weight: 2 + (i % 2) });
      if (res.status !== 200) throw new Error(`PATCH answered ${res.status}`);
      const next = await ads.next(5000);
      samples.push(performance.now() - t0);
      ads.send({ type_url: EDS, resource_names: ['echo'], version_info: next.version_info, response_nonce: next.nonce });
      held = next;
    }
    const st = stats(samples);
    console.log(
      `replicas on etcd: write on A → new version on a client of B (debounce 20 ms, 100 writes): p50 ${ms(st.median)}, p99 ${ms(st.p99)} (last version ${held.version_info})`,
    );
  } finally {
    ads.close();
    await a.stop();
    await b.stop();
  }
}

async function main(): Promise<void> {
  console.log(`node ${process.version}, ${os.cpus().length} cpus, ${runs} runs`);
  if (!latencyOnly) await levelLoad();
  if (!hasEtcd()) {
    console.log('etcd: skipped (etcd-server is not installed)');
    return;
  }
  const etcd = await startEtcd();
  try {
    if (!latencyOnly) await etcdLoad(etcd);
    for (let r = 0; r < (latencyOnly ? runs : 1); r++) await replicaLatency(etcd);
  } finally {
    await etcd.destroy();
  }
}

async function levelLoad(): Promise<void> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-bench-store-'));
  try {
    const level = async () => LocalStore.open(await LevelJournal.open(dir));
    await loadBench('LevelDB (classic-level)', level, level);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function etcdLoad(etcd: EtcdProcess): Promise<void> {
  {
    let n = 0;
    const prefix = () => `/bench-load-${n}/`;
    await loadBench(
      'etcd',
      async () => {
        n++;
        return EtcdStore.open({ endpoints: [etcd.endpoint], prefix: prefix() });
      },
      () => EtcdStore.open({ endpoints: [etcd.endpoint], prefix: prefix() }),
    );
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
