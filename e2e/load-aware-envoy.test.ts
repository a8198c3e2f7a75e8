/**
 * Load-aware locality with real Envoy 1.40 sidecars (e2e/support/envoy-process.ts) bootstrapped by
 * `canopy bootstrap envoy`, which points Envoy's `cluster_manager.load_stats_config` at Canopy: Envoys in
 * three zones report their load every second, as grpc-js-xds clients do in e2e/load-aware.test.ts. Zone A's
 * Envoy offering twice zone A's capacity spills the excess to the nearest zone (B) within a few intervals,
 * the weights hold still over a steady window, and the spill drains back when the load falls; an Envoy and a
 * grpc-js-xds client in zone A add up to one node's load. Requests are gRPC through each Envoy's outbound
 * listener; every one must succeed, and no Envoy rejects an update.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { startBackend, type Backend } from '../server/src/demo/backend.js';
import { xdsBootstrap } from '../server/src/demo/bootstrap.js';
import { XdsEchoClient } from '../server/src/demo/xds-client.js';
import { parseLocality } from '../server/src/domain/locality.js';
import { startCanopyProcess, type CanopyProcess } from './support/canopy-process.js';
import { EnvoyProcess, envoySkip, explainFailure } from './support/envoy-process.js';
import { clientNode, debugLoad as readLoad, shareOf, waterfallEcho, type LoadDebug } from './support/load-aware.js';
import { countBy, DirectEchoClient, pacedLoad, type PacedLoad } from './support/paced-echo.js';

const skip = envoySkip();
const INTERVAL_MS = 1000;
const STEADY_MS = 10_000;
const MAX_STEADY_CHANGES = 3;
/** Requests per second one endpoint serves: zone A (two endpoints) holds 60, zone B (three) 90. */
const CAPACITY = 30;
const CAPACITY_A = 2 * CAPACITY;
const PORT = 20091;
const BACKENDS: [id: string, host: string, locality: string][] = [
  ['a1', '127.0.91.1', 'r1/za/s'],
  ['a2', '127.0.91.2', 'r1/za/s'],
  ['b1', '127.0.91.3', 'r1/zb/s'],
  ['b2', '127.0.91.4', 'r1/zb/s'],
  ['b3', '127.0.91.5', 'r1/zb/s'],
  ['c1', '127.0.91.6', 'r2/zc/s'],
  ['c2', '127.0.91.7', 'r2/zc/s'],
];
const LOCALITIES = BACKENDS.map((b) => b[2]);
const SIDECARS = [
  { nodeId: 'envoy-za', locality: 'r1/za/s', outbound: '127.0.92.1' },
  { nodeId: 'envoy-zb', locality: 'r1/zb/s', outbound: '127.0.92.2' },
  { nodeId: 'envoy-zc', locality: 'r2/zc/s', outbound: '127.0.92.3' },
];
const zoneOf = (backend: string) => backend[0]!;

describe('load-aware locality with real Envoy sidecars reporting load', { skip, timeout: 120_000 }, () => {
  const backends: Backend[] = [];
  const envoys: EnvoyProcess[] = [];
  const clients: DirectEchoClient[] = [];
  const loads: PacedLoad[] = [];
  let canopy: CanopyProcess;
  let grpcClient: XdsEchoClient | undefined;

  const debugLoad = () => readLoad(canopy);
  const nodeA = (d: LoadDebug) => clientNode(d, 'r1/za/s');
  /** Zone A's share in the weights zone A's clients get, and the load that puts there. */
  const assignedToA = (d: LoadDebug): { share: number; rps: number } | undefined => {
    const n = nodeA(d);
    if (!n) return undefined;
    const share = shareOf(n.weights, 'r1/za/s');
    return { share, rps: share * n.offeredRps };
  };
  /** Polls /debug/load until `ok`; returns the time it took in intervals, or fails. */
  const waitFor = async (what: string, ok: (d: LoadDebug) => boolean, maxIntervals: number): Promise<number> => {
    const started = Date.now();
    while (Date.now() - started < maxIntervals * INTERVAL_MS) {
      if (ok(await debugLoad())) return (Date.now() - started) / INTERVAL_MS;
      await sleep(INTERVAL_MS / 4);
    }
    assert.fail(`${what} not within ${maxIntervals} intervals: ${JSON.stringify(await debugLoad())}`);
  };

  /**
   * Waits for a window of two intervals whose requests from `load` by zone pass `ok` (new weights reach an
   * Envoy some time after they change, later on a busy machine), for 10 intervals at most; returns that
   * window's counts, or the last window's (the caller's assertion then says what went where).
   */
  const settledWindow = async (load: PacedLoad, ok: (z: Record<string, number>) => boolean) => {
    const end = Date.now() + 10 * INTERVAL_MS;
    for (;;) {
      const t0 = Date.now();
      await sleep(2 * INTERVAL_MS);
      const z = countBy(load.served, t0, Date.now(), zoneOf);
      if (ok(z) || Date.now() > end) return z;
    }
  };
  const onlyA = (z: Record<string, number>) => z['a']! > 0 && !z['b'] && !z['c'];

  before(async () => {
    for (const [id, host, locality] of BACKENDS)
      backends.push(await startBackend({ id, host, locality: parseLocality(locality) }));
    canopy = await startCanopyProcess({
      server: { debounceMs: 20, loadReportingIntervalMs: INTERVAL_MS },
      services: [waterfallEcho(backends, LOCALITIES, CAPACITY, PORT)],
    });
    const xds = canopy.xdsUri.replace(/^.*:\/\//, '');
    envoys.push(
      ...(await Promise.all(
        SIDECARS.map((s) =>
          EnvoyProcess.start({
            xds,
            nodeId: s.nodeId,
            locality: parseLocality(s.locality),
            outboundAddress: s.outbound,
          }),
        ),
      )),
    );
    for (const s of SIDECARS) clients.push(new DirectEchoClient(`${s.outbound}:${PORT}`));
  });
  after(async () => {
    await Promise.all(loads.map((l) => l.stop()));
    for (const c of clients) c.close();
    grpcClient?.close();
    await Promise.all(envoys.map((e) => e.stop()));
    await canopy?.stop();
    await Promise.all(backends.map((b) => b.stop()));
  });

  it('zone A at twice its capacity spills to zone B and drains back; an Envoy and a gRPC client add up', () =>
    explainFailure(
      () => envoys,
      async () => {
        // Every sidecar is routing before the load starts (Envoy takes its clusters over ADS first).
        for (const c of clients) await c.who(30_000);
        const [a, b, c] = clients.map((client) => pacedLoad(client, 4, 90_000));
        loads.push(a!, b!, c!);
        a!.setRate(20);
        // Each zone's Envoy reports (only through load_stats_config: Envoy 1.40 ignores a Cluster's lrs_server).
        await waitFor('a report from each zone', (d) => (d.clientNodes?.length ?? 0) === 3, 30);
        const low = await settledWindow(a!, onlyA);
        assert.ok(low['a']! > 0 && !low['b'] && !low['c'], `below capacity all in zone A: ${JSON.stringify(low)}`);

        // Twice zone A's capacity: zone A keeps its capacity and the excess goes to zone B, not C.
        a!.setRate(2 * CAPACITY_A);
        const spillAfter = await waitFor(
          'weights giving zone A its capacity',
          (d) => {
            const x = assignedToA(d);
            return !!x && x.share < 1 && Math.abs(x.rps - CAPACITY_A) <= 0.1 * CAPACITY_A;
          },
          8,
        );
        console.log(`# Envoy: spill in place after ${spillAfter.toFixed(1)} report intervals`);
        assert.ok(spillAfter <= 6, `the spill took ${spillAfter.toFixed(1)} intervals`);
        await sleep(INTERVAL_MS);
        const t1 = Date.now();
        const epoch1 = (await debugLoad()).epoch;
        await sleep(STEADY_MS);
        const t2 = Date.now();
        const d2 = await debugLoad();
        const z = countBy(a!.served, t1, t2, zoneOf);
        const secs = (t2 - t1) / 1000;
        const rps = { a: (z['a'] ?? 0) / secs, b: (z['b'] ?? 0) / secs, c: (z['c'] ?? 0) / secs };
        const total = rps.a + rps.b + rps.c;
        console.log(
          `# Envoy at ${2 * CAPACITY_A} rps: zone A ${rps.a.toFixed(1)}, B ${rps.b.toFixed(1)}, C ${rps.c.toFixed(1)} rps; ` +
            `weight changes ${d2.epoch - epoch1} in ${STEADY_MS / INTERVAL_MS} intervals; offered ${nodeA(d2)?.offeredRps.toFixed(1)}`,
        );
        assert.ok(total > 1.5 * CAPACITY_A, `the Envoy sent too little to test the spill: ${total.toFixed(1)} rps`);
        const assigned = assignedToA(d2)!;
        assert.ok(Math.abs(assigned.rps - CAPACITY_A) <= 0.1 * CAPACITY_A, `weights put ${assigned.rps} rps on A`);
        // What zone A's backends served of this Envoy's requests: its share, ±10%, plus 3 sigma of sampling.
        const n = (z['a'] ?? 0) + (z['b'] ?? 0) + (z['c'] ?? 0);
        const sigma = Math.sqrt(n * assigned.share * (1 - assigned.share)) / secs;
        const wantA = assigned.share * total;
        assert.ok(
          Math.abs(rps.a - wantA) <= 0.1 * wantA + 3 * sigma,
          `zone A served ${rps.a.toFixed(1)}, want ${wantA.toFixed(1)}`,
        );
        assert.ok(rps.c <= 0.05 * total, `nothing to zone C while zone B has room: ${JSON.stringify(rps)}`);
        assert.ok(d2.epoch - epoch1 <= MAX_STEADY_CHANGES, `${d2.epoch - epoch1} weight changes under steady load`);

        // An Envoy and a proxyless client in zone A: one node, their loads add up (70 + 50 rps).
        grpcClient = new XdsEchoClient({
          target: 'xds:///echo',
          bootstrap: xdsBootstrap({ serverUri: canopy.xdsUri, nodeId: 'grpc-za', locality: parseLocality('r1/za/s') }),
        });
        await grpcClient.who(30_000);
        const g = pacedLoad(grpcClient, 50, 60_000);
        loads.push(g);
        a!.setRate(70);
        // Both report (the gRPC client's first report can come an interval or two late on a busy machine).
        const added = (d: LoadDebug) => (nodeA(d)?.offeredRps ?? 0) > 100;
        await waitFor('the two loads added up on node r1/za/s', added, 15);
        const offered = nodeA(await debugLoad())?.offeredRps ?? 0;
        console.log(`# Envoy 70 rps + grpc-js 50 rps in zone A: node r1/za/s offers ${offered.toFixed(1)} rps`);
        assert.ok(offered > 100 && offered < 145, `Envoy and gRPC load add up to ~120 rps: ${offered.toFixed(1)}`);
        const mixed = await settledWindow(g, (z) => (z['b'] ?? 0) > 0);
        assert.ok((mixed['b'] ?? 0) > 0, `the gRPC client gets the spill too: ${JSON.stringify(mixed)}`);

        // The load falls: the spill drains back to zone A.
        a!.setRate(10);
        g.setRate(10);
        const back = await waitFor('all back in zone A', (d) => assignedToA(d)?.share === 1, 10);
        console.log(`# back in zone A after ${back.toFixed(1)} report intervals`);
        const drained = await settledWindow(a!, onlyA);
        assert.ok(
          drained['a']! > 0 && !drained['b'] && !drained['c'],
          `all back in zone A: ${JSON.stringify(drained)}`,
        );

        await Promise.all(loads.map((l) => l.stop()));
        const errors = loads.flatMap((l) => l.errors);
        assert.deepEqual(errors.slice(0, 5), [], `${errors.length} failed requests`);
        for (const e of envoys) {
          assert.deepEqual([...(await e.rejected())], [], `${e.nodeId}: no rejected update`);
          assert.equal(await e.stat('load_reporter.errors'), 0, `${e.nodeId}: load report stream errors`);
          // Envoy's names are the other way round: `responses` counts the reports it sent.
          assert.ok((await e.stat('load_reporter.responses'))! > 5, `${e.nodeId} sent load reports`);
        }
      },
    ));
});
