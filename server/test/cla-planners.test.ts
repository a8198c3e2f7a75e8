/**
 * The CLA planners (domain/cla-planners.ts): for random trees, modes, locality
 * policies, load-aware weights and clients, two clients of a service given the
 * same cache key are given the same CLA, whichever planner answered (the key
 * and the CLA come from one planner, so they cannot disagree). And the planner
 * that answers is the one the service's balancing calls for.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import type { Cla } from '../src/domain/cla.js';
import { planCla } from '../src/domain/cla-planners.js';
import { emptyPlacement, type Placement, type Scope } from '../src/domain/locality.js';
import { Mesh } from '../src/domain/mesh.js';
import type { LocalityPolicy } from '../src/domain/policy.js';
import type { Health, LbMode } from '../src/domain/service.js';
import { ep, lb, service } from './support/builders.js';

const LOCALITIES = ['r0/z0/s0', 'r0/z0/s1', 'r0/z1/s0', 'r1/z0/s0', 'r1/z1/s1', 'r2/z0/s0'];
const CLIENT_LOCALITIES = [...LOCALITIES, 'r0/z0/s9', 'r0/z9/s9', 'r9/z9/s9', '//'];
const SCOPES: readonly (readonly Scope[])[] = [['region', 'zone', 'subzone'], ['region', 'zone'], ['region']];
const TEAMS = ['a', 'b'];

const POLICIES: readonly (LocalityPolicy | undefined)[] = [
  undefined,
  { failoverPriority: [{ scope: 'label:team' }] },
  { affinity: [{ scope: 'label:team', weight: 90 }] },
  {
    distribute: [
      {
        from: 'r0/*',
        to: [
          { pattern: 'r0', weight: 80 },
          { pattern: 'r1', weight: 20 },
        ],
      },
    ],
  },
  { failover: { rules: [{ from: ['r0'], to: { type: 'only', values: ['r2'] } }], unmatched: 'last' } },
];

const caseArb = fc.record({
  endpoints: fc.array(
    fc.record({
      locality: fc.constantFrom(...LOCALITIES),
      health: fc.constantFrom<Health>('healthy', 'healthy', 'unhealthy'),
      weight: fc.integer({ min: 1, max: 3 }),
      team: fc.constantFrom(...TEAMS),
    }),
    { minLength: 1, maxLength: 10 },
  ),
  mode: fc.constantFrom<LbMode>('failover', 'strict', 'random'),
  scopes: fc.constantFrom(...SCOPES),
  policy: fc.integer({ min: 0, max: POLICIES.length - 1 }),
  // Load-aware weights for some matched nodes: a seed picks which nodes have them and the leaf weights.
  load: fc.option(fc.integer({ min: 1, max: 1000 }), { nil: undefined }),
});

type Case = typeof caseArb extends fc.Arbitrary<infer T> ? T : never;

function meshOf(c: Case): Mesh {
  const endpoints = c.endpoints.map((e) =>
    ep({ locality: e.locality, health: e.health, weight: e.weight, labels: { team: e.team } }),
  );
  const policy = POLICIES[c.policy];
  const balancing = { ...lb(c.mode, c.scopes), ...(policy ? { policy } : {}) };
  const mesh = new Mesh();
  mesh.put(service('svc', endpoints, balancing));
  const seed = c.load;
  if (seed !== undefined) {
    const state = mesh.get('svc')!;
    const leaves = state.tree.root.leaves(state.tree.levels);
    const weights = new Map<number, Map<number, number>>();
    for (const where of clients()) {
      const node = state.tree.matchPlacement(where);
      // Every other node id has weights: the rest get the plain CLA.
      if ((node.id + seed) % 2 === 0) continue;
      weights.set(node.id, new Map(leaves.map((l, i) => [l.id, 1 + ((seed + i * node.id) % 7)])));
    }
    state.setLoad({ epoch: seed, weights });
  }
  return mesh;
}

function clients(): Placement[] {
  return CLIENT_LOCALITIES.flatMap((where) => {
    const [region = '', zone = '', subzone = ''] = where.split('/');
    const base: Placement = { ...emptyPlacement(), locality: { region, zone, subzone } };
    return TEAMS.map((team) => ({ ...base, labels: { team } }));
  });
}

/** What a client is sent of a CLA: its groups in order, with their endpoints' addresses. */
function sent(cla: Cla) {
  return {
    overprovisioning: cla.overprovisioningFactor,
    groups: cla.groups.map((g) => ({
      locality: g.locality,
      priority: g.priority,
      weight: g.weight,
      endpoints: g.endpoints.map((e) => `${e.address}:${e.port}/${e.health}/${e.weight}`),
    })),
  };
}

describe('CLA planners', () => {
  it('equal keys mean equal CLAs, in every mode, with and without a policy or load weights', () => {
    fc.assert(
      fc.property(caseArb, (c) => {
        const state = meshOf(c).get('svc')!;
        const byKey = new Map<string, { planner: string; cla: ReturnType<typeof sent> }>();
        for (const client of clients()) {
          const plan = planCla(state, client);
          const cla = sent(plan.cla());
          const seen = byKey.get(plan.key);
          if (!seen) byKey.set(plan.key, { planner: plan.planner, cla });
          else {
            assert.equal(plan.planner, seen.planner, `key ${plan.key}: one planner`);
            assert.deepEqual(cla, seen.cla, `key ${plan.key}: the same CLA`);
          }
        }
      }),
      { numRuns: 300 },
    );
  });

  it('the planner that answers is the one the balancing calls for', () => {
    const mesh = meshOf({
      endpoints: [{ locality: 'r0/z0/s0', health: 'healthy', weight: 1, team: 'a' }],
      mode: 'failover',
      scopes: SCOPES[0]!,
      policy: 0,
      load: undefined,
    });
    const client = clients()[0]!;
    const state = mesh.get('svc')!;
    assert.equal(planCla(state, client).planner, 'failover');
    const node = state.tree.matchPlacement(client);
    state.setLoad({ epoch: 7, weights: new Map([[node.id, new Map([[node.id, 1]])]]) });
    assert.equal(planCla(state, client).planner, 'load-aware');
    assert.equal(planCla(state, client).key, `L${node.id}#7`);
    // A node without weights this interval gets the plain CLA.
    state.setLoad({ epoch: 8, weights: new Map() });
    assert.equal(planCla(state, client).planner, 'failover');
    const withPolicy = meshOf({
      endpoints: [{ locality: 'r0/z0/s0', health: 'healthy', weight: 1, team: 'a' }],
      mode: 'failover',
      scopes: SCOPES[0]!,
      policy: 1,
      load: undefined,
    });
    assert.equal(planCla(withPolicy.get('svc')!, client).planner, 'policy');
  });
});
