/**
 * The load-aware plans kept for a restart (domain/load/load-plan-record.ts, sessions/load-controller.ts):
 * a controller that plans a spill writes a record; a new controller (a restarted process, its own node ids)
 * restores it and serves the same weights before any client reports, holds them while no report comes,
 * and plans from fresh reports after a whole interval of them. What is read back is untrusted: every
 * malformed record is refused with the field at fault.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parsePlanRecord, PLAN_RECORD_FORMAT } from '../src/domain/load/load-plan-record.js';
import { parseLocality } from '../src/domain/locality.js';
import { Mesh } from '../src/domain/mesh.js';
import { parseServiceSpec } from '../src/domain/spec.js';
import { LoadController } from '../src/sessions/load-controller.js';

const INTERVAL = 1000;
const ZONES = ['r1/za/s', 'r1/zb/s', 'r2/zc/s'];
const emptyClient = { locality: parseLocality(''), network: '', node: '', cluster: '', labels: {} };

/** `extra` zones first: another process builds its tree in another order, so its node ids differ. */
function meshOf(order: readonly string[] = ZONES): Mesh {
  const mesh = new Mesh();
  const spec = parseServiceSpec({
    name: 'echo',
    loadBalancing: {
      mode: 'failover',
      routingPreference: ['region', 'zone', 'subzone'],
      loadAware: { balancing: 'waterfall', capacityRps: 30 },
    },
    endpoints: order.flatMap((z) => [
      { address: `10.0.${ZONES.indexOf(z)}.1`, port: 80, locality: parseLocality(z) },
      { address: `10.0.${ZONES.indexOf(z)}.2`, port: 80, locality: parseLocality(z) },
    ]),
  });
  assert.ok(spec.ok);
  mesh.put(spec.value);
  return mesh;
}

function controller(mesh: Mesh, clock: { t: number }): LoadController {
  return new LoadController({ mesh, intervalMs: INTERVAL, notify: () => {}, now: () => clock.t });
}

function report(load: LoadController, rps: number): void {
  load.record('c1', { ...emptyClient, locality: parseLocality('r1/za/s') }, [
    {
      service: 'echo',
      intervalSeconds: 1,
      upstream: [{ locality: parseLocality('r1/za/s'), issued: rps, succeeded: rps, errors: 0, inProgress: 0 }],
    },
  ]);
}

/** The weights the mesh serves zone A's client node, by locality path. */
function served(mesh: Mesh): Record<string, number> {
  const s = mesh.get('echo')!;
  const node = s.tree.match(['r1', 'za', 's']);
  const w = s.load?.weights.get(node.id);
  const byId = new Map([...s.tree.nodesOf()].map((n) => [n.id, n.path().join('/')]));
  return Object.fromEntries([...(w ?? [])].map(([leaf, v]) => [byId.get(leaf)!, v]));
}

describe('load-aware plans kept for a restart', () => {
  it('a restarted controller serves the kept weights at once, holds them, then plans from fresh reports', () => {
    const clock = { t: 0 };
    const mesh = meshOf();
    const before = controller(mesh, clock);
    for (let p = 1; p <= 8; p++) {
      clock.t = p * INTERVAL;
      report(before, 120);
      before.tick();
    }
    const spill = served(mesh);
    assert.ok((spill['r1/zb/s'] ?? 0) > 300, `a spill to zone B: ${JSON.stringify(spill)}`);
    const text = JSON.stringify(before.planRecord());

    // A new process: other node ids, no reports yet.
    const mesh2 = meshOf([...ZONES].reverse());
    const after = controller(mesh2, clock);
    const parsed = parsePlanRecord(text);
    assert.ok(parsed.ok, JSON.stringify(!parsed.ok && parsed.errors));
    assert.deepEqual(after.restore(parsed.value), ['echo']);
    assert.deepEqual(served(mesh2), spill, 'the same weights, before any report');
    // No report for a while (clients reconnecting): the kept weights stay.
    for (let p = 9; p <= 12; p++) {
      clock.t = p * INTERVAL;
      after.tick();
      assert.deepEqual(served(mesh2), spill, `interval ${p}: held`);
    }
    // Reports again: one interval of them, then planning goes on from the kept state (no jump).
    for (let p = 13; p <= 16; p++) {
      clock.t = p * INTERVAL;
      report(after, 120);
      after.tick();
      const w = served(mesh2);
      assert.ok((w['r1/zb/s'] ?? 0) > 300, `interval ${p}: zone B keeps its share: ${JSON.stringify(w)}`);
    }
  });

  it('a kept plan whose service is gone, not load-aware or of other scopes is not used', () => {
    const clock = { t: 0 };
    const mesh = meshOf();
    const c = controller(mesh, clock);
    const record = {
      format: PLAN_RECORD_FORMAT,
      at: 1,
      services: {
        gone: { scopes: ['region', 'zone', 'subzone'], epoch: 3, plan: { nodes: [], drained: [] } },
        echo: {
          scopes: ['region', 'zone'],
          epoch: 3,
          plan: { nodes: [{ node: ['r1', 'za'], shares: [{ leaf: ['r1', 'zb'], share: 1 }] }], drained: [] },
        },
      },
    } as const;
    assert.deepEqual(c.restore(record), []);
    assert.equal(mesh.get('echo')!.load, undefined);
  });

  const good = {
    format: 1,
    at: 5,
    services: {
      echo: {
        scopes: ['region', 'zone', 'subzone'],
        epoch: 2,
        plan: {
          nodes: [
            {
              node: ['r1', 'za', 's'],
              shares: [
                { leaf: ['r1', 'za', 's'], share: 0.5 },
                { leaf: ['r1', 'zb', 's'], share: 0.5 },
              ],
            },
          ],
          drained: ['r2/zc/s'],
        },
      },
    },
  };
  const bad: [string, unknown, RegExp][] = [
    ['not JSON', '{', /^\(root\): is not JSON/],
    ['a list', [], /^\(root\): must be an object/],
    ['another format', { ...good, format: 2 }, /^format: must be 1/],
    ['no services', { format: 1, at: 1 }, /^services: must be an object/],
    ['a negative epoch', edit((s) => (s.epoch = -1)), /services\.echo\.epoch: must be a non-negative integer/],
    ['no scopes', edit((s) => (s.scopes = [])), /services\.echo\.scopes: must be 1 to 16 names/],
    [
      'a share above 1',
      edit((s) => (s.plan.nodes[0]!.shares[0]!.share = 1.5)),
      /shares\[0\]\.share: must be a number from 0 to 1/,
    ],
    [
      'a NaN share',
      edit((s) => (s.plan.nodes[0]!.shares[0]!.share = 'NaN' as unknown as number)),
      /share: must be a number/,
    ],
    [
      'shares above 1 in all',
      edit((s) => (s.plan.nodes[0]!.shares[0]!.share = 0.9)),
      /nodes\[0\]\.shares: sum to 1\.4/,
    ],
    [
      'a short leaf path',
      edit((s) => (s.plan.nodes[0]!.shares[1]!.leaf = ['r1'])),
      /shares\[1\]\.leaf: must be a path of 3/,
    ],
    [
      'a node deeper than the scopes',
      edit((s) => (s.plan.nodes[0]!.node = ['a', 'b', 'c', 'd'])),
      /nodes\[0\]\.node: must be a path/,
    ],
    ['an empty name in a path', edit((s) => (s.plan.nodes[0]!.node = [''])), /nodes\[0\]\.node/],
    [
      'drained not a list',
      edit((s) => (s.plan.drained = 'r2' as unknown as string[])),
      /plan\.drained: must be a list/,
    ],
    ['nodes not a list', edit((s) => (s.plan.nodes = {} as unknown as [])), /plan\.nodes: must be a list/],
  ];
  function edit(f: (s: (typeof good)['services']['echo']) => void): unknown {
    const copy = structuredClone(good);
    f(copy.services.echo);
    return copy;
  }

  it('a valid record parses', () => {
    const r = parsePlanRecord(JSON.stringify(good));
    assert.ok(r.ok, JSON.stringify(!r.ok && r.errors));
  });
  for (const [what, value, want] of bad)
    it(`refuses ${what}, naming the field`, () => {
      const r = parsePlanRecord(typeof value === 'string' ? value : JSON.stringify(value));
      assert.equal(r.ok, false);
      const text = !r.ok ? r.errors.map((e) => `${e.path || '(root)'}: ${e.message}`).join('; ') : '';
      assert.match(text, want);
    });
});
