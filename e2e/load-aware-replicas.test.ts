/**
 * Load-aware locality across replicas: two `canopy serve` replicas on one real
 * etcd, real @grpc/grpc-js-xds clients in zone A split across them, each
 * offering 0.9× zone A's capacity to its own replica, 1.8× together. Each
 * replica alone would see no overload; sharing per-replica aggregates through
 * etcd, both spill the excess to zone B and send the same weights. Killed
 * (kill -9), a replica's share expires with its lease and the other replans.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Etcd3 } from 'etcd3';
import { startBackend, type Backend } from '../server/src/demo/backend.js';
import { xdsBootstrap } from '../server/src/demo/bootstrap.js';
import { XdsEchoClient } from '../server/src/demo/xds-client.js';
import { parseLocality } from '../server/src/domain/locality.js';
import { startCanopyProcess, type CanopyProcess } from './support/canopy-process.js';
import { etcdSkip, startEtcd, type EtcdProcess } from './support/etcd-process.js';
import { clientNode, debugLoad, shareOf, waterfallEcho, type LoadDebug } from './support/load-aware.js';

const INTERVAL_MS = 1000;
const CAPACITY = 30;
/** Zone A: two endpoints × 30 rps. */
const CAPACITY_A = 2 * CAPACITY;
const PREFIX = '/canopy-load-replicas/';
const BACKENDS: [id: string, host: string, locality: string][] = [
  ['a1', '127.0.32.1', 'r1/za/s'],
  ['a2', '127.0.32.2', 'r1/za/s'],
  ['b1', '127.0.32.3', 'r1/zb/s'],
  ['b2', '127.0.32.4', 'r1/zb/s'],
  ['c1', '127.0.32.5', 'r2/zc/s'],
  ['c2', '127.0.32.6', 'r2/zc/s'],
];

/** Sends `rps` requests a second (in 50 ms ticks) until stopped or `maxMs`; counts who served them per zone. */
function offer(client: XdsEchoClient, rps: number, maxMs: number) {
  const served: { at: number; zone: string }[] = [];
  let failures = 0;
  let owed = 0;
  const started = Date.now();
  const timer = setInterval(() => {
    if (Date.now() - started > maxMs) return clearInterval(timer);
    for (owed += rps / 20; owed >= 1; owed--) {
      client.who(2000).then(
        (r) => served.push({ at: Date.now(), zone: r.backend_id[0]! }),
        () => failures++,
      );
    }
  }, 50);
  return { served, failures: () => failures, stop: () => clearInterval(timer) };
}

const shareOfA = (w: Record<string, number>): number => shareOf(w, 'r1/za/s');

describe('load-aware locality across two replicas on etcd', { skip: etcdSkip(), timeout: 120_000 }, () => {
  let etcd: EtcdProcess;
  const backends: Backend[] = [];
  const replicas: CanopyProcess[] = [];
  const clients: XdsEchoClient[] = [];

  const nodeA = (d: LoadDebug) => clientNode(d, 'r1/za/s');
  /** Polls until `ok` holds (at most `intervals` report intervals). */
  const waitFor = async <T>(what: string, intervals: number, read: () => Promise<T>, ok: (v: T) => boolean) => {
    const end = Date.now() + intervals * INTERVAL_MS;
    let v = await read();
    while (!ok(v) && Date.now() < end) {
      await sleep(INTERVAL_MS / 4);
      v = await read();
    }
    assert.ok(ok(v), `${what}: ${JSON.stringify(v)}`);
    return v;
  };

  before(async () => {
    etcd = await startEtcd();
    for (const [id, host, locality] of BACKENDS)
      backends.push(await startBackend({ id, host, locality: parseLocality(locality) }));
    const config = {
      server: { debounceMs: 20, loadReportingIntervalMs: INTERVAL_MS },
      services: [
        waterfallEcho(
          backends,
          BACKENDS.map((b) => b[2]),
          CAPACITY,
        ),
      ],
    };
    for (let i = 0; i < 2; i++)
      replicas.push(await startCanopyProcess(config, ['--store', `etcd://${etcd.endpoint}${PREFIX}`]));
    // Zone A's clients: one on each replica. The second lists the first replica after its own (pick_first), so
    // it fails over when its replica dies, as a client of a replicated control plane does.
    for (let i = 0; i < 2; i++) {
      clients.push(
        new XdsEchoClient({
          target: 'xds:///echo',
          bootstrap: xdsBootstrap({
            serverUri: i === 0 ? replicas[0]!.xdsUri : `ipv4:${replicas[1]!.xdsUri},${replicas[0]!.xdsUri}`,
            nodeId: `client-za-${i}`,
            locality: parseLocality('r1/za/s'),
          }),
        }),
      );
    }
  });
  after(async () => {
    for (const c of clients) c.close();
    for (const r of replicas) await r.kill();
    await Promise.all(backends.map((b) => b.stop()));
    await etcd?.destroy();
  });

  it('each replica sees 0.9× zone A capacity, both plan from the 1.8× sum, send the same weights; a killed one expires', async () => {
    // 0.9× each: alone neither replica spills; together 1.8×, so zone B has room for the whole excess (at exactly
    // 2×, the sum sits on zone A + B's capacity and any noise above it rightly spills to zone C).
    const loads = clients.map((c) => offer(c, 0.9 * CAPACITY_A, 60_000));
    try {
      // Both replicas spill half of zone A's load to zone B: only the sum of both replicas' clients overloads zone A.
      for (const r of replicas) {
        await waitFor(
          'the replica plans from both replicas and spills',
          15,
          () => debugLoad(r),
          (d) => {
            const n = nodeA(d);
            return (
              (d.shared?.replicas.length ?? 0) === 2 &&
              !!n &&
              n.offeredRps > 1.5 * CAPACITY_A &&
              // Settled: a first report can carry the requests queued while the client started, beyond zone B's room too.
              !n.weights['r2/zc/s'] &&
              Math.abs(shareOfA(n.weights) * n.offeredRps - CAPACITY_A) <= 0.1 * CAPACITY_A
            );
          },
        );
      }
      // The same weights from both, read in the same interval.
      const same = await waitFor(
        'both replicas send the same weights',
        10,
        () => Promise.all(replicas.map((r) => debugLoad(r))),
        ([x, y]) => x!.shared?.period === y!.shared?.period && !nodeA(x!)?.weights['r2/zc/s'],
      );
      assert.deepEqual(nodeA(same[0]!)?.weights, nodeA(same[1]!)?.weights);
      const w = nodeA(same[0]!)!.weights;
      assert.ok((w['r1/zb/s'] ?? 0) > 0 && !w['r2/zc/s'], `the excess goes to zone B, none to C: ${JSON.stringify(w)}`);
      console.log(`# two replicas, 2 × ${0.9 * CAPACITY_A} rps: weights ${JSON.stringify(w)} on both`);

      // What the backends served from both clients over 5 s: zone A about its capacity.
      const t0 = Date.now();
      await sleep(5_000);
      const t1 = Date.now();
      const zones: Record<string, number> = { a: 0, b: 0, c: 0 };
      for (const l of loads) for (const s of l.served) if (s.at >= t0 && s.at < t1) zones[s.zone]!++;
      const secs = (t1 - t0) / 1000;
      const n = zones['a']! + zones['b']! + zones['c']!;
      const share = shareOfA(w);
      const sigma = Math.sqrt(n * share * (1 - share)) / secs;
      const rpsA = zones['a']! / secs;
      console.log(
        `# served: zone A ${rpsA.toFixed(1)}, B ${(zones['b']! / secs).toFixed(1)}, C ${zones['c']} requests`,
      );
      assert.ok(
        Math.abs(rpsA - CAPACITY_A) <= 0.1 * CAPACITY_A + 3 * sigma,
        `zone A served ${rpsA.toFixed(1)} rps, want ${CAPACITY_A} ±10% (+${(3 * sigma).toFixed(1)} sampling)`,
      );
      assert.equal(zones['c'], 0);

      // kill -9 the second replica: its lease (3 intervals) expires, and the first replans from its own clients.
      // Its client has stopped sending (and fails over to the first replica, reporting nothing): the first
      // replica's sum falls back to 1× once the dead replica's last record stops counting.
      const dead = (await debugLoad(replicas[1]!)).shared!.replica;
      assert.ok((await debugLoad(replicas[0]!)).shared!.replicas.some((r) => r.replica === dead && r.offeredRps > 30));
      // The first replica's clients drop to half of zone A's capacity, so that once the dead replica's share is
      // gone, zone A has room for all that is left (at exactly 1×, any residue of the dead one's reports would spill).
      const first = loads[0]!;
      first.stop();
      loads[0] = offer(clients[0]!, CAPACITY_A / 2, 60_000);
      loads[1]!.stop();
      await replicas[1]!.kill();
      const killedAt = Date.now();
      const etcdClient = new Etcd3({ hosts: `http://${etcd.endpoint}` });
      try {
        await waitFor(
          "the killed replica's record expires with its lease",
          6,
          async () => (await etcdClient.get(`${PREFIX}load/${dead}`).string()) ?? 'gone',
          (v) => v === 'gone',
        );
        console.log(`# the killed replica's record expired after ${((Date.now() - killedAt) / 1000).toFixed(1)} s`);
      } finally {
        etcdClient.close();
      }
      const alone = await waitFor(
        'the survivor replans: all in zone A',
        20,
        () => debugLoad(replicas[0]!),
        (d) => {
          const a = nodeA(d);
          return d.shared?.replicas.length === 1 && !!a && shareOfA(a.weights) === 1;
        },
      );
      assert.deepEqual(
        alone.shared?.replicas.map((r) => r.replica),
        [alone.shared?.replica],
      );
      console.log(`# survivor back to zone A only ${((Date.now() - killedAt) / 1000).toFixed(1)} s after the kill`);
      // A few requests may time out on a loaded machine; none should fail for want of a backend.
      const failed = first.failures() + loads[0]!.failures();
      assert.ok(failed <= 0.01 * (first.served.length + loads[0]!.served.length), `${failed} requests failed`);

      // A clean stop revokes the lease: the record goes at once, not a lease later.
      const survivor = alone.shared!.replica;
      for (const l of loads) l.stop();
      // Clients end their streams while their server is up (grpc-js-xds re-opens LRS to a dead one forever).
      for (const c of clients.splice(0)) c.close();
      const check = new Etcd3({ hosts: `http://${etcd.endpoint}` });
      try {
        assert.notEqual(await check.get(`${PREFIX}load/${survivor}`).string(), null);
        await replicas[0]!.stop();
        assert.equal(await check.get(`${PREFIX}load/${survivor}`).string(), null, 'revoked on stop');
      } finally {
        check.close();
      }
    } finally {
      for (const l of loads) l.stop();
    }
  });
});
