/**
 * Why a load-aware client node gets its weights (domain/load/load-explain.ts),
 * from real plans: the load controller fed LRS-shaped reports on a test clock.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { explain } from '../src/domain/explain.js';
import { explainLoad } from '../src/domain/load/load-explain.js';
import { parseLocality, type Placement } from '../src/domain/locality.js';
import { Mesh } from '../src/domain/mesh.js';
import { parseServiceSpec } from '../src/domain/spec.js';
import { LoadController } from '../src/sessions/load-controller.js';

const ZONES = ['r1/za/s', 'r1/zb/s', 'r2/zc/s'];
const at = (l: string): Placement => ({ locality: parseLocality(l), network: '', node: '', cluster: '', labels: {} });

function setup(loadAware: object = { balancing: 'waterfall', capacityRps: 30 }) {
  const mesh = new Mesh();
  const spec = parseServiceSpec({
    name: 'echo',
    loadBalancing: { mode: 'failover', routingPreference: ['region', 'zone', 'subzone'], loadAware },
    endpoints: ZONES.flatMap((z, i) => [
      { address: `10.0.${i}.1`, port: 80, locality: parseLocality(z) },
      { address: `10.0.${i}.2`, port: 80, locality: parseLocality(z) },
    ]),
  });
  assert.ok(spec.ok);
  mesh.put(spec.value);
  const clock = { t: 0 };
  const load = new LoadController({ mesh, intervalMs: 1000, notify: () => {}, now: () => clock.t });
  /** `n` intervals with zone A's clients offering `rps`. */
  const run = (rps: number, n: number) => {
    for (let i = 0; i < n; i++) {
      clock.t += 1000;
      load.record('c', at('r1/za/s'), [
        {
          service: 'echo',
          intervalSeconds: 1,
          upstream: [{ locality: parseLocality('r1/za/s'), issued: rps, succeeded: rps, errors: 0, inProgress: 0 }],
        },
      ]);
      load.tick();
    }
  };
  const why = (l = 'r1/za/s') => explainLoad(mesh.get('echo')!, at(l), load.report('echo'))!;
  return { mesh, load, run, why };
}

describe('explainLoad', () => {
  it('is absent for a service that is not load-aware', () => {
    const { mesh, load } = setup({ balancing: 'off' });
    assert.equal(explainLoad(mesh.get('echo')!, at('r1/za/s'), load.report('echo')), undefined);
  });

  it('before the first interval, says so', () => {
    const { why } = setup();
    assert.deepEqual(why().summary, ['no interval planned yet: weights are computed once every report interval']);
  });

  it('below capacity: all of the node’s load stays in its nearest locality', () => {
    const { run, why } = setup();
    run(20, 3);
    const e = why();
    assert.deepEqual(e.summary, ["all of this node's load (20 rps) stays in r1/za/s: 20 of 60 rps"]);
    assert.equal(e.localities[0]!.why, "r1/za/s has room: 20 of 60 rps; keeps 100% of this node's load (its nearest)");
    assert.equal(e.localities[2]!.why, 'r2/zc/s: not needed while nearer localities have room (0 of 60 rps)');
  });

  it('at twice capacity: the nearest is full and the excess goes to the nearest with room', () => {
    const { run, why, mesh } = setup();
    run(120, 8);
    const e = why();
    assert.equal(
      e.summary[0],
      "r1/za/s full: 60 of 60 rps; 50% of this node's load goes to r1/zb/s, the nearest with room",
    );
    assert.deepEqual(
      e.localities.map((l) => [l.locality, l.tier, l.weight, Math.round(l.reportedRps)]),
      [
        ['r1/za/s', 0, 500, 120],
        ['r1/zb/s', 1, 500, 0],
        ['r2/zc/s', 2, 0, 0],
      ],
    );
    // The CLA explained is the load CLA: both zones in priority 0 at the load weights.
    const cla = explain(mesh.get('echo')!, at('r1/za/s'));
    assert.deepEqual(
      cla.localities.filter((l) => l.priority === 0).map((l) => [l.locality.zone, l.weight]),
      [
        ['za', 500],
        ['zb', 500],
      ],
    );
    assert.match(cla.cacheKey, /^L\d+#\d+$/);
  });

  it('a spill no longer needed is said to drain back', () => {
    // The interval after the load dropped: zone A has room again, zone B still holds a damped share.
    const { mesh } = setup();
    const loc = (path: string, assignedRps: number) => ({
      path,
      healthy: 2,
      endpoints: 2,
      capacityRps: 60,
      assignedRps,
      drained: false,
    });
    const e = explainLoad(mesh.get('echo')!, at('r1/za/s'), {
      at: 0,
      intervalMs: 1000,
      landedRps: {},
      spillFraction: 0.2,
      localities: [loc('r1/za/s', 30), loc('r1/zb/s', 0), loc('r2/zc/s', 0)],
      clientNodes: [
        {
          path: 'r1/za/s',
          offeredRps: 30,
          unplacedRps: 0,
          weights: { 'r1/za/s': 800, 'r1/zb/s': 200 },
          spill: 0.2,
        },
      ],
    })!;
    assert.equal(
      e.summary[0],
      "20% of this node's load goes past its nearest localities, to r1/zb/s: the spill drains back gradually",
    );
    assert.equal(
      e.localities[1]!.why,
      "r1/zb/s still takes 20% of this node's load: a spill no longer needed drains back gradually (0 of 60 rps)",
    );
  });

  it('beyond every capacity: what finds no room is named', () => {
    const { run, why } = setup();
    run(400, 8);
    assert.match(why().summary.join('\n'), /\d+ rps of this node's load find no capacity anywhere/);
  });

  it('a drained locality says how healthy it is and when it comes back', () => {
    const { run, why, mesh } = setup({ balancing: 'waterfall', capacityRps: 30, drainBelow: 0.6 });
    const s = mesh.get('echo')!;
    const a1 = s.spec.endpoints.find((e) => e.address === '10.0.0.1')!;
    mesh.patch('echo', [{ ...a1, health: 'unhealthy' }]);
    run(20, 3);
    const e = why();
    assert.ok(
      e.summary.includes('r1/za/s drained: 1 of 2 healthy, below 60%; no new traffic until above 70%'),
      JSON.stringify(e.summary),
    );
    assert.match(e.summary[0]!, /its nearest are drained/);
  });
});
