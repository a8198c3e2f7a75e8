/**
 * One match per planner (domain/cla-planners.ts): over random trees (with a
 * network level, so network-first plans are drawn too), modes, `reach`,
 * policies and clients, (1) two clients given equal cache keys are sent
 * byte-equal encoded CLAs, and (2) the key a planner answers with is the one
 * made from the match its CLA is built from: `planKey`/`policyKey` of the
 * client's one match, which is the tree's deepest node on the client's path,
 * and the policy outcome built from that match carries the same key.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { planCla } from '../src/domain/cla-planners.js';
import { buildCla } from '../src/domain/cla.js';
import { emptyPlacement, type Placement, type Scope } from '../src/domain/locality.js';
import { Mesh } from '../src/domain/mesh.js';
import type { LocalityPolicy } from '../src/domain/policy.js';
import { hasPolicy } from '../src/domain/policy.js';
import { matchPolicy, policyKey, policyOutcome } from '../src/domain/policy-cla.js';
import { matchPlan, planKey, planOf } from '../src/domain/priorities.js';
import type { LbMode, LoadBalancing } from '../src/domain/service.js';
import { encodeCla } from '../src/resources/endpoint/endpoint-codec.js';
import { ep, lb, service } from './support/builders.js';

const NETWORKS = ['n0', 'n1', ''];
const LOCALITIES = ['r0/z0/s0', 'r0/z0/s1', 'r0/z1/s0', 'r1/z0/s0', 'r1/z1/s1', 'r2/z0/s0', 'r0/z0/'];
const CLIENT_LOCALITIES = [...LOCALITIES, 'r0/z0/s9', 'r0/z9/s9', 'r9/z9/s9', '//'];
const SCOPES: readonly (readonly Scope[])[] = [
  ['region', 'zone', 'subzone'],
  ['network', 'region', 'zone'],
  ['network', 'region'],
  ['zone'],
];
const TEAMS = ['a', 'b', ''];

const POLICIES: readonly (LocalityPolicy | undefined)[] = [
  undefined,
  { failoverPriority: [{ scope: 'label:team' }, { scope: 'region' }] },
  { affinity: [{ scope: 'label:team', weight: 90 }] },
  { trafficDistribution: 'PreferSameZone' },
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
  { failover: { rules: [{ from: ['r0', 'n0'], to: { type: 'only', values: ['r2', 'n1'] } }], unmatched: 'drop' } },
];

const caseArb = fc.record({
  endpoints: fc.array(
    fc.record({
      locality: fc.constantFrom(...LOCALITIES),
      network: fc.constantFrom(...NETWORKS),
      weight: fc.integer({ min: 1, max: 3 }),
      team: fc.constantFrom(...TEAMS),
    }),
    { minLength: 0, maxLength: 12 },
  ),
  mode: fc.constantFrom<LbMode>('failover', 'failover', 'strict', 'random'),
  scopes: fc.constantFrom(...SCOPES),
  crossNetwork: fc.boolean(),
  reach: fc.option(fc.integer({ min: 1, max: 6 }), { nil: undefined }),
  policy: fc.integer({ min: 0, max: POLICIES.length - 1 }),
});

type Case = typeof caseArb extends fc.Arbitrary<infer T> ? T : never;

function balancing(c: Case): LoadBalancing {
  const policy = POLICIES[c.policy];
  return {
    ...lb(c.mode, c.scopes),
    crossNetworkFailover: c.crossNetwork,
    ...(c.reach !== undefined ? { reach: { minEndpoints: c.reach } } : {}),
    ...(policy ? { policy } : {}),
  };
}

function stateOf(c: Case) {
  const mesh = new Mesh();
  const endpoints = c.endpoints.map((e) =>
    ep({ locality: e.locality, network: e.network, weight: e.weight, labels: e.team ? { team: e.team } : {} }),
  );
  mesh.put(service('svc', endpoints, balancing(c)));
  return mesh.get('svc')!;
}

function clients(): Placement[] {
  return CLIENT_LOCALITIES.flatMap((where) => {
    const [region = '', zone = '', subzone = ''] = where.split('/');
    return NETWORKS.flatMap((network) =>
      TEAMS.map((team) => ({
        ...emptyPlacement(),
        locality: { region, zone, subzone },
        network,
        labels: team ? { team } : {},
      })),
    );
  });
}

function hex(bytes: Uint8Array): string {
  return Buffer.from(bytes).toString('hex');
}

describe('CLA planners: one match for the key and the CLA', () => {
  it('equal keys give byte-equal encoded CLAs', () => {
    fc.assert(
      fc.property(caseArb, (c) => {
        const state = stateOf(c);
        const byKey = new Map<string, string>();
        for (const client of clients()) {
          const plan = planCla(state, client);
          const bytes = hex(encodeCla(plan.cla()));
          const seen = byKey.get(plan.key);
          if (seen === undefined) byKey.set(plan.key, bytes);
          else assert.equal(bytes, seen, `key ${plan.key}: the same bytes`);
        }
      }),
      { numRuns: 200 },
    );
  });

  it('the key is the one made from the match the CLA is built from', () => {
    fc.assert(
      fc.property(caseArb, (c) => {
        const state = stateOf(c);
        const { tree } = state;
        const lbc = state.spec.loadBalancing;
        for (const client of clients()) {
          const plan = planCla(state, client);
          const deepest = tree.matchPlacement(client);
          if (hasPolicy(lbc.policy)) {
            const m = matchPolicy(tree, lbc, client);
            assert.equal(m.matched, deepest, 'the policy match is the client deepest node');
            const outcome = policyOutcome('svc', m);
            assert.equal(plan.key, policyKey(m));
            assert.equal(outcome.key, plan.key, 'the outcome carries the key of its match');
            assert.equal(hex(encodeCla(outcome.cla)), hex(encodeCla(plan.cla())));
            continue;
          }
          const m = matchPlan(tree, lbc, client);
          if (lbc.mode !== 'random') assert.equal(m.node, deepest, 'the plan match is the client deepest node');
          const built = planOf(m);
          assert.equal(plan.key, planKey(m));
          assert.equal(built.key, plan.key, 'the key alone and the built plan agree');
          assert.equal(hex(encodeCla(buildCla('svc', tree, lbc, built))), hex(encodeCla(plan.cla())));
        }
      }),
      { numRuns: 200 },
    );
  });
});
