/**
 * `npm run bench:store [-- --runs=5] [--latency-only | --writes-only | --etcd-writes-only]`: the store backends.
 *
 *   1. A 100k-endpoint service into each durable backend and back: the PUT
 *      (one atomic write), then a cold open that loads it (LevelDB: a new
 *      process's view of the data directory; etcd: a new client's range read).
 *   2. Replicas: a write through replica A's admin API until a raw ADS client
 *      on replica B holds the new version, 100 writes, p50/p99.
 *   3. Write throughput (issue 19): 64 writers in flight, each PATCHing one
 *      endpoint's weight again and again (a read-modify-write, as the admin
 *      PATCH does), acknowledged only once durable. LevelDB with group commit
 *      against the same store committing one synced write per change,
 *      interleaved pairs; then `canopy serve` over HTTP (the user's path) and
 *      etcd at the same concurrency.
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
import { EtcdStore } from '../server/src/store/etcd/etcd-store.js';
import { LevelJournal } from '../server/src/store/level/level-journal.js';
import { LocalStore } from '../server/src/store/level/local-store.js';
import type { Store } from '../server/src/store/store.js';
import { failoverService, makeEndpoints } from './data.js';
import { ratio, show as showSpread, spread } from './stats.js';

const runs = Number(process.argv.find((a) => a.startsWith('--runs='))?.slice('--runs='.length) ?? 5);
const latencyOnly = process.argv.includes('--latency-only');
const writesOnly = process.argv.includes('--writes-only') || process.argv.includes('--etcd-writes-only');
const etcdWritesOnly = process.argv.includes('--etcd-writes-only');
const IN_FLIGHT = 64;
/** PATCHes a throughput run makes, and the most time it may take. */
const WRITES = 4000;
const WRITE_RUN_MS = 15_000;
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
    await store.put(
      { ...spec, endpoints: spec.endpoints.map((e) => ({ ...e, weight: 1 + (r % 2) })) },
      { owner: 'api' },
    );
    put.push(performance.now() - t0);
    await store.close();
    const t1 = performance.now();
    const again = await reopen();
    const { services } = await again.list();
    load.push(performance.now() - t1);
    if (services[0]?.spec.endpoints.length !== 100_000)
      throw new Error(`${name}: reloaded ${services[0]?.spec.endpoints.length}`);
    await again.close();
  }
  show(`${name}: PUT of a 100k-endpoint service`, put);
  show(`${name}: cold load of it`, load);
}

async function replicaLatency(etcd: EtcdProcess): Promise<void> {
  const config = {
    server: { debounceMs: 20 },
    services: [
      {
        name: 'echo',
        endpoints: makeEndpoints(100, 10).map((e) => ({ address: e.address, port: e.port, locality: e.locality })),
      },
    ],
  };
  const prefix = `etcd://${etcd.endpoint}/bench-replicas-${Date.now()}/`;
  const a = await startCanopyProcess(config, ['--store', prefix]);
  const b = await startCanopyProcess(config, ['--store', prefix]);
  const ads = new RawAdsStream(b.xdsUri);
  try {
    ads.send({
      type_url: EDS,
      node: { id: 'bench', locality: { region: 'r0', zone: 'z0', sub_zone: 's0' } },
      resource_names: ['echo'],
    });
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
      ads.send({
        type_url: EDS,
        resource_names: ['echo'],
        version_info: next.version_info,
        response_nonce: next.nonce,
      });
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

/** `IN_FLIGHT` writers sharing `WRITES` PATCHes (bounded by WRITE_RUN_MS): acknowledged writes/s and latency p99. */
async function writeRun(patch: (i: number) => Promise<unknown>): Promise<{ rate: number; p99: number }> {
  const latencies: number[] = [];
  let next = 0;
  const t0 = performance.now();
  const end = t0 + WRITE_RUN_MS;
  const writer = async (): Promise<void> => {
    while (next < WRITES && performance.now() < end) {
      const i = next++;
      const s = performance.now();
      await patch(i);
      latencies.push(performance.now() - s);
    }
  };
  await Promise.all(Array.from({ length: IN_FLIGHT }, writer));
  const elapsed = performance.now() - t0;
  return { rate: (latencies.length / elapsed) * 1000, p99: stats(latencies).p99 };
}

/** A PATCH as the admin API makes it: read the endpoint as held, change its weight, write it back. */
function storePatcher(store: Store, keys: readonly string[]): (i: number) => Promise<unknown> {
  return (i) =>
    store.editEndpoints('svc', (current) => {
      const ep = current.get(keys[i % keys.length]!)!;
      return { upserts: [{ ...ep, weight: 1 + (i % 100) }], removals: [] };
    });
}

async function writeThroughput(): Promise<void> {
  const spec = failoverService('svc', makeEndpoints(1000));
  const keys = spec.endpoints.map((e) => `${e.address}:${e.port}`);
  const grouped = { rate: [] as number[], p99: [] as number[] };
  const single = { rate: [] as number[], p99: [] as number[] };
  const once = async (maxGroup: number | undefined, into: typeof grouped) => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-bench-writes-'));
    try {
      const store = await LocalStore.open(await LevelJournal.open(dir), maxGroup ? { maxGroup } : {});
      await store.put(spec, { owner: 'api' });
      const r = await writeRun(storePatcher(store, keys));
      await store.close();
      into.rate.push(r.rate);
      into.p99.push(r.p99);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  };
  for (let r = 0; r < runs; r++) {
    // Interleaved, alternating which goes first.
    if (r % 2 === 0) {
      await once(undefined, grouped);
      await once(1, single);
    } else {
      await once(1, single);
      await once(undefined, grouped);
    }
  }
  const [gr, sr, gp, sp] = [spread(grouped.rate), spread(single.rate), spread(grouped.p99), spread(single.p99)];
  console.log(`LevelDB store, ${IN_FLIGHT} PATCHes in flight, ${WRITES} per run, ${runs} interleaved pairs:`);
  console.log(`  group commit:        ${showSpread(gr)} acknowledged PATCHes/s, p99 ${showSpread(gp)} ms`);
  console.log(`  one sync per change: ${showSpread(sr)} acknowledged PATCHes/s, p99 ${showSpread(sp)} ms`);
  console.log(`  ratio (median rates): ${ratio(gr, sr)}×`);
  await httpThroughput(spec, keys);
}

/** The user's path: `canopy serve` on the embedded store, PATCHes over HTTP from this process. */
async function httpThroughput(spec: ReturnType<typeof failoverService>, keys: readonly string[]): Promise<void> {
  const config = {
    server: { debounceMs: 100 },
    services: [
      {
        name: 'svc',
        endpoints: spec.endpoints.map((e) => ({ address: e.address, port: e.port, locality: e.locality })),
      },
    ],
  };
  const server = await startCanopyProcess(config, ['--admin-write-limit', '10000000']);
  const rate: number[] = [];
  const p99: number[] = [];
  try {
    for (let r = 0; r < runs; r++) {
      const res = await writeRun(async (i) => {
        const path = `/api/v1/services/svc/endpoints/${encodeURIComponent(keys[i % keys.length]!)}`;
        const reply = await server.admin('PATCH', path, { weight: 1 + (i % 100) });
        if (reply.status !== 200) throw new Error(`PATCH answered ${reply.status}`);
      });
      rate.push(res.rate);
      p99.push(res.p99);
    }
  } finally {
    await server.stop();
  }
  console.log(
    `canopy serve (LevelDB, group commit), PATCH over HTTP from one client process, ${IN_FLIGHT} in flight, ${runs} runs:`,
  );
  console.log(`  ${showSpread(spread(rate))} acknowledged PATCHes/s, p99 ${showSpread(spread(p99))} ms`);
}

async function etcdThroughput(etcd: EtcdProcess): Promise<void> {
  const spec = failoverService('svc', makeEndpoints(1000));
  const keys = spec.endpoints.map((e) => `${e.address}:${e.port}`);
  const rate: number[] = [];
  const p99: number[] = [];
  for (let r = 0; r < runs; r++) {
    const store = await EtcdStore.open({ endpoints: [etcd.endpoint], prefix: `/bench-writes-${r}-${Date.now()}/` });
    try {
      await store.put(spec, { owner: 'api' });
      const res = await writeRun(storePatcher(store, keys));
      rate.push(res.rate);
      p99.push(res.p99);
    } finally {
      await store.close();
    }
  }
  console.log(`etcd store (one replica, one etcd member), ${IN_FLIGHT} PATCHes in flight, ${runs} runs:`);
  console.log(`  ${showSpread(spread(rate))} acknowledged PATCHes/s, p99 ${showSpread(spread(p99))} ms`);
}

async function main(): Promise<void> {
  console.log(
    `node ${process.version}, ${os.cpus().length} cpus, load average ${os
      .loadavg()
      .map((x) => x.toFixed(1))
      .join(' ')}, ${runs} runs`,
  );
  if (writesOnly) {
    if (!etcdWritesOnly) await writeThroughput();
    if (!hasEtcd()) return console.log('etcd: skipped (etcd-server is not installed)');
    const etcd = await startEtcd();
    try {
      await etcdThroughput(etcd);
    } finally {
      await etcd.destroy();
    }
    return;
  }
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
