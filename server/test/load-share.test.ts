/**
 * Replicas sharing per-replica load aggregates (the pure side: the load
 * controller's shared mode over an in-memory share; e2e/load-share.test.ts
 * runs the same with two `canopy serve` replicas on a real etcd). Each replica
 * sees half of zone A's clients; planned from the sum, both spill, and both
 * send the same weights; a replica that joins late follows the eldest's state.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import type { LoadShare, ReplicaLoad } from '../src/domain/load/load-aggregate.js';
import { exportPlan, importPlan, offeredByPath, periodRecords, eldest } from '../src/domain/load/load-aggregate.js';
import { parseLocality } from '../src/domain/locality.js';
import { Mesh } from '../src/domain/mesh.js';
import { parseServiceSpec } from '../src/domain/spec.js';
import { LoadController } from '../src/sessions/load-controller.js';

const INTERVAL = 1000;
const ZONES = ['r1/za/s', 'r1/zb/s', 'r2/zc/s'];

function meshOf(): Mesh {
  const mesh = new Mesh();
  const spec = parseServiceSpec({
    name: 'echo',
    loadBalancing: {
      mode: 'failover',
      routingPreference: ['region', 'zone', 'subzone'],
      loadAware: { balancing: 'waterfall', capacityRps: 30 },
    },
    endpoints: ZONES.flatMap((z, i) => [
      { address: `10.0.${i}.1`, port: 80, locality: parseLocality(z) },
      { address: `10.0.${i}.2`, port: 80, locality: parseLocality(z) },
    ]),
  });
  assert.ok(spec.ok);
  mesh.put(spec.value);
  return mesh;
}

/** Replicas meeting in memory: what etcd holds, one record per live replica. */
class Board {
  readonly records = new Map<string, ReplicaLoad>();
  shareFor(replica: string): LoadShare {
    return {
      replica,
      publish: async (r) => void this.records.set(replica, r),
      others: () => [...this.records.values()].filter((r) => r.replica !== replica),
      close: async () => void this.records.delete(replica),
    };
  }
}

interface Replica {
  readonly name: string;
  readonly mesh: Mesh;
  readonly load: LoadController;
}

function replica(name: string, clock: { t: number }, board?: Board): Replica {
  const mesh = meshOf();
  const load = new LoadController({
    mesh,
    intervalMs: INTERVAL,
    notify: () => {},
    now: () => clock.t,
    ...(board ? { share: board.shareFor(name) } : {}),
  });
  return { name, mesh, load };
}

/** One LRS report: `rps` from a client in zone A, all sent to zone A as far as it knows. */
function report(r: Replica, reporter: string, rps: number): void {
  r.load.record(reporter, { ...emptyClient, locality: parseLocality('r1/za/s') }, [
    {
      service: 'echo',
      intervalSeconds: 1,
      upstream: [{ locality: parseLocality('r1/za/s'), issued: rps, succeeded: rps, errors: 0, inProgress: 0 }],
    },
  ]);
}
const emptyClient = { locality: parseLocality(''), network: '', node: '', cluster: '', labels: {} };

/** The weights zone A's client node gets, by locality path. */
function weights(r: Replica): Record<string, number> {
  return r.load.report('echo')?.clientNodes.find((n) => n.path === 'r1/za/s')?.weights ?? {};
}
const shareOfA = (w: Record<string, number>) => (w['r1/za/s'] ?? 0) / Object.values(w).reduce((a, b) => a + b, 0 || 1);

/** One interval: every replica reports, publishes at its start and plans at its middle. */
function period(clock: { t: number }, replicas: readonly Replica[], perReplicaRps: number, p: number): void {
  clock.t = p * INTERVAL;
  for (const r of replicas) report(r, `client-of-${r.name}`, perReplicaRps);
  for (const r of replicas) r.load.publish(p);
  clock.t = p * INTERVAL + INTERVAL / 2;
  for (const r of replicas) r.load.planShared(p);
}

describe('replicas share load aggregates', () => {
  it('alone, a replica seeing 1× zone A capacity keeps it all in zone A', () => {
    const clock = { t: 0 };
    const a = replica('a', clock);
    for (let p = 1; p <= 8; p++) {
      clock.t = p * INTERVAL;
      report(a, 'c1', 60);
      a.load.tick();
    }
    assert.deepEqual(Object.keys(weights(a)), ['r1/za/s']);
  });

  it('two replicas each seeing 1× both spill from the 2× sum, with the same weights every interval', () => {
    const clock = { t: 0 };
    const board = new Board();
    const a = replica('a', clock, board);
    const b = replica('b', clock, board);
    for (let p = 1; p <= 10; p++) {
      period(clock, [a, b], 60, p);
      assert.deepEqual(weights(a), weights(b), `period ${p}`);
      assert.deepEqual([...a.mesh.get('echo')!.load!.weights.values()].length, 1);
    }
    const w = weights(a);
    assert.ok(Math.abs(shareOfA(w) - 0.5) < 0.05, `zone A takes half of 120 rps: ${JSON.stringify(w)}`);
    assert.ok((w['r1/zb/s'] ?? 0) > 0 && !w['r2/zc/s'], `the excess goes to zone B: ${JSON.stringify(w)}`);
    const r = a.load.report('echo')!;
    assert.deepEqual(
      r.shared?.replicas.map((x) => [x.replica, Math.round(x.offeredRps)]),
      [
        ['a', 60],
        ['b', 60],
      ],
    );
    assert.equal(r.shared?.followed, 'a');
  });

  it('a replica that joins late follows the eldest replica at once; a dead one stops counting and the rest replan', () => {
    const clock = { t: 0 };
    const board = new Board();
    const a = replica('a', clock, board);
    const b = replica('b', clock, board);
    for (let p = 1; p <= 10; p++) period(clock, [a, b], 60, p);
    // c joins: a, b and c each see 40 rps (120 in all); c has no history of its own.
    const c = replica('c', clock, board);
    for (let p = 11; p <= 14; p++) {
      period(clock, [a, b, c], 40, p);
      assert.deepEqual(weights(c), weights(a), `period ${p}: the newcomer sends the same weights`);
    }
    // b dies: its record stops being renewed (and its key expires with its lease); a and c now see 80 rps.
    for (let p = 15; p <= 30; p++) {
      period(clock, [a, c], 40, p);
      assert.deepEqual(weights(c), weights(a), `period ${p}`);
    }
    // 80 rps from zone A now: zone A keeps 60 of it (three quarters), zone B takes the rest.
    assert.ok(Math.abs(shareOfA(weights(a)) - 0.75) < 0.05, JSON.stringify(weights(a)));
    assert.deepEqual(
      a.load.report('echo')!.shared?.replicas.map((x) => x.replica),
      ['a', 'c'],
    );
  });
});

describe('replicas agree (property)', () => {
  it('for random loads per replica, zone and interval, and replicas joining late, every replica sends the same weights', () => {
    const zoneOf = ['r1/za/s', 'r1/zb/s', 'r2/zc/s'];
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 0, max: 2 }), { minLength: 2, maxLength: 3 }),
        fc.array(
          fc.array(fc.array(fc.integer({ min: 0, max: 150 }), { minLength: 3, maxLength: 3 }), {
            minLength: 3,
            maxLength: 3,
          }),
          {
            minLength: 6,
            maxLength: 10,
          },
        ),
        (joins, loads) => {
          const clock = { t: 0 };
          const board = new Board();
          const all = joins.map((_, i) => replica(`r${i}`, clock, board));
          loads.forEach((perReplica, k) => {
            const p = k + 1;
            const live = all.filter((_, i) => joins[i]! <= k);
            clock.t = p * INTERVAL;
            live.forEach((r, i) =>
              zoneOf.forEach((z, zi) =>
                r.load.record(`${r.name}-${z}`, { ...emptyClient, locality: parseLocality(z) }, [
                  {
                    service: 'echo',
                    intervalSeconds: 1,
                    upstream: [
                      {
                        locality: parseLocality(z),
                        issued: perReplica[i % 3]![zi]!,
                        succeeded: 0,
                        errors: 0,
                        inProgress: 0,
                      },
                    ],
                  },
                ]),
              ),
            );
            for (const r of live) r.load.publish(p);
            clock.t = p * INTERVAL + INTERVAL / 2;
            for (const r of live) r.load.planShared(p);
            const byPath = (r: Replica) =>
              JSON.stringify(r.load.report('echo')?.clientNodes.map((n) => [n.path, n.weights]) ?? []);
            for (const r of live) assert.equal(byPath(r), byPath(live[0]!), `interval ${p}`);
          });
        },
      ),
      { numRuns: 60 },
    );
  });
});

describe('load aggregates', () => {
  it('sums offered load per client position, sorted', () => {
    assert.deepEqual(
      offeredByPath([
        { path: ['r2', 'z', 's'], rps: 1 },
        { path: ['r1', 'z', 's'], rps: 2 },
        { path: ['r2', 'z', 's'], rps: 3 },
      ]),
      [
        { path: ['r1', 'z', 's'], rps: 2 },
        { path: ['r2', 'z', 's'], rps: 4 },
      ],
    );
  });

  it('plans from this period and the last, follows the eldest (then the smallest name)', () => {
    const rec = (replica: string, period: number, since: number): ReplicaLoad => ({
      replica,
      period,
      since,
      at: 0,
      intervalMs: INTERVAL,
      services: [],
    });
    const records = periodRecords([rec('c', 9, 3), rec('b', 10, 2), rec('a', 8, 1), rec('d', 10, 2)], 10);
    assert.deepEqual(
      records.map((r) => r.replica),
      ['b', 'c', 'd'],
    );
    assert.equal(eldest(records)?.replica, 'b');
  });

  it("a plan state by paths round-trips into another replica's node ids", () => {
    const x = meshOf().get('echo')!;
    const y = meshOf().get('echo')!;
    const za = x.tree.match(['r1', 'za', 's']);
    const zb = x.tree.match(['r1', 'zb', 's']);
    const state = {
      shares: new Map([
        [
          za.id,
          new Map([
            [za.id, 0.5],
            [zb.id, 0.5],
          ]),
        ],
      ]),
      drained: new Set(['r2/zc/s']),
    };
    const shared = exportPlan(x.tree, state);
    assert.deepEqual(shared.nodes[0]?.node, ['r1', 'za', 's']);
    const back = importPlan(y.tree, shared);
    const yza = y.tree.match(['r1', 'za', 's']).id;
    assert.deepEqual([...(back.shares.get(yza) ?? [])].length, 2);
    assert.deepEqual([...back.drained], ['r2/zc/s']);
  });
});
