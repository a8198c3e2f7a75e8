/**
 * loadBalancing.reach: a client's CLA takes whole tiers, best first, until it
 * holds minEndpoints routable endpoints. Pure plans and CLAs, the server's CLA
 * cache (entries that follow the tree) under health flips, and a property
 * over random trees. Config, store and admin input: reach-config.test.ts.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { buildCla, prioritiesOf, type Cla } from '../src/domain/cla.js';
import type { Placement, Scope } from '../src/domain/locality.js';
import { Mesh, type ServiceState } from '../src/domain/mesh.js';
import { resolvePolicy } from '../src/domain/policy-cla.js';
import { matchPlan, planFor, planKey } from '../src/domain/priorities.js';
import { endpointKey, type Endpoint, type LbMode, type LoadBalancing } from '../src/domain/service.js';
import { encodeCla } from '../src/resources/endpoint/endpoint-codec.js';
import { serverClaCache } from '../src/resources/endpoint/endpoint.js';
import { flatten } from '../src/wire/rope.js';
import { client, ep, lb, service } from './support/builders.js';
import { pgvCheckBytes } from './support/pgv.js';

const CLA_MESSAGE = 'envoy.config.endpoint.v3.ClusterLoadAssignment';

function capped(min: number, mode: LbMode = 'failover', scopes?: readonly Scope[]): LoadBalancing {
  return { ...lb(mode, scopes), reach: { minEndpoints: min } };
}

function stateOf(endpoints: readonly Endpoint[], balancing: LoadBalancing): ServiceState {
  const mesh = new Mesh();
  mesh.put(service('svc', endpoints, balancing));
  return mesh.get('svc')!;
}

function claFor(s: ServiceState, c: Placement): Cla {
  return buildCla(s.name, s.tree, s.spec.loadBalancing, planFor(s.tree, s.spec.loadBalancing, c));
}

function ranks(cla: Cla, endpoints: readonly Endpoint[]): (number | undefined)[] {
  const byKey = new Map([...prioritiesOf(cla)].map(([e, p]) => [endpointKey(e), p]));
  return endpoints.map((e) => byKey.get(endpointKey(e)));
}

/** Contiguous group-by-group bytes of the same CLA, built from scratch (no cache, no ropes). */
function independentBytes(endpoints: readonly Endpoint[], balancing: LoadBalancing, at: Placement): Buffer {
  const cla = claFor(stateOf(endpoints, balancing), at);
  return Buffer.from(encodeCla({ clusterName: cla.clusterName, groups: cla.groups, overprovisioningFactor: 140 }));
}

// Seen from r1/z1/s1: tier 0 holds 2 endpoints, tier 1 one, tier 2 one, tier 3 two.
const LOCS = ['r1/z1/s1', 'r1/z1/s1', 'r1/z1/s2', 'r1/z2/s1', 'r2/z1/s1', 'r2/z2/s1'];
const HOME = client({ locality: 'r1/z1/s1' });

describe('reach: tiers stop once minEndpoints are held', () => {
  const U = undefined;
  const table: [string, LoadBalancing, (number | undefined)[]][] = [
    ['absent: every tier', lb(), [0, 0, 1, 2, 3, 3]],
    ['1: priority 0 whole although it holds 2', capped(1), [0, 0, U, U, U, U]],
    ['2: priority 0 already holds 2', capped(2), [0, 0, U, U, U, U]],
    ['3: one more tier', capped(3), [0, 0, 1, U, U, U]],
    ['5: the last tier is taken whole (6 held)', capped(5), [0, 0, 1, 2, 3, 3]],
    ['more than the service has: every tier', capped(100), [0, 0, 1, 2, 3, 3]],
    ['strict: moot (one tier)', capped(1, 'strict'), [0, 0, U, U, U, U]],
    ['random: moot (one tier)', capped(1, 'random'), [0, 0, 0, 0, 0, 0]],
  ];
  for (const [name, balancing, want] of table) {
    it(name, () => {
      const eps = LOCS.map((l) => ep({ locality: l }));
      assert.deepEqual(ranks(claFor(stateOf(eps, balancing), HOME), eps), want);
    });
  }

  it('counts routable endpoints only: unhealthy ones in a tier do not count', () => {
    const eps = LOCS.map((l, i) => ep({ locality: l, health: i === 1 ? 'unhealthy' : 'healthy' }));
    assert.deepEqual(ranks(claFor(stateOf(eps, capped(2)), HOME), eps), [
      0,
      undefined,
      1,
      undefined,
      undefined,
      undefined,
    ]);
  });

  it('network first: the foreign-network tiers are cut the same way', () => {
    const scopes: Scope[] = ['network', 'region', 'zone'];
    const eps = [
      ep({ network: 'n1', locality: 'r1/z1/s1' }),
      ep({ network: 'n1', locality: 'r2/z1/s1' }),
      ep({ network: 'n2', locality: 'r1/z1/s1' }),
      ep({ network: 'n2', locality: 'r2/z1/s1' }),
    ];
    const at = client({ network: 'n1', locality: 'r1/z1/s1' });
    assert.deepEqual(ranks(claFor(stateOf(eps, lb('failover', scopes)), at), eps), [0, 1, 2, 3]);
    assert.deepEqual(ranks(claFor(stateOf(eps, capped(3, 'failover', scopes)), at), eps), [0, 1, 2, undefined]);
  });

  it('the plan key names the cut only when it bites, and the key alone (a cache hit) agrees with the plan', () => {
    const eps = LOCS.map((l) => ep({ locality: l }));
    for (const min of [1, 2, 3, 4, 5, 6, 7]) {
      const s = stateOf(eps, capped(min));
      for (const at of ['r1/z1/s1', 'r1/z1/s2', 'r2/z2/s1', 'r9/z9/s9']) {
        const c = client({ locality: at });
        const plan = planFor(s.tree, s.spec.loadBalancing, c);
        assert.equal(planKey(matchPlan(s.tree, s.spec.loadBalancing, c)), plan.key, `min ${min} at ${at}`);
        const uncut = planFor(s.tree, lb(), c);
        assert.equal(plan.key === uncut.key, plan.tiers.length === uncut.tiers.length, `min ${min} at ${at}`);
      }
    }
  });

  it('absent, or never biting, gives the bytes and keys of a service without it', () => {
    const eps = LOCS.map((l) => ep({ locality: l }));
    const plain = stateOf(eps, lb());
    const wide = stateOf(eps, capped(eps.length));
    const a = serverClaCache();
    const b = serverClaCache();
    for (const at of ['r1/z1/s1', 'r1/z2/s1', 'r2/z1/s1', 'r9/z9/s9']) {
      const c = client({ locality: at });
      const x = a.lookup(plain, c);
      const y = b.lookup(wide, c);
      assert.equal(x.key, y.key);
      assert.deepEqual(Buffer.from(flatten(y.bytes)), Buffer.from(flatten(x.bytes)));
      assert.deepEqual(Buffer.from(flatten(x.bytes)), independentBytes(eps, lb(), c));
    }
  });
});

describe('reach through the server CLA cache (entries that follow the tree)', () => {
  it('a health flip that drops the held count below minEndpoints adds the next tier, and back', () => {
    const eps = LOCS.map((l) => ep({ locality: l }));
    const mesh = new Mesh();
    mesh.put(service('svc', eps, capped(3)));
    const s = () => mesh.get('svc')!;
    const cache = serverClaCache();
    const prioritiesSent = () => {
      const entry = cache.lookup(s(), HOME);
      const bytes = Buffer.from(flatten(entry.bytes));
      assert.deepEqual(pgvCheckBytes(CLA_MESSAGE, bytes), []);
      const current = [...s().endpoints.values()];
      assert.deepEqual(bytes, independentBytes(current, capped(3), HOME), 'same bytes as a fresh build');
      return ranks(entry.cla, eps);
    };
    assert.deepEqual(prioritiesSent(), [0, 0, 1, undefined, undefined, undefined]);
    const shape = s().tree.shape;
    // One of the two local endpoints fails: 2 held in tiers 0-1, so tier 2 joins.
    mesh.patch('svc', [{ ...eps[0]!, health: 'unhealthy' }]);
    assert.equal(s().tree.shape, shape, 'the tree keeps its shape: only counts changed');
    assert.deepEqual(prioritiesSent(), [undefined, 0, 1, 2, undefined, undefined]);
    // Tier 1 fails too: its node leaves the tree, so tiers renumber; 2 held in 0-1, tier 2 (r2) joins.
    mesh.patch('svc', [{ ...eps[2]!, health: 'unhealthy' }]);
    assert.deepEqual(prioritiesSent(), [undefined, 0, undefined, 1, 2, 2]);
    mesh.patch('svc', [
      { ...eps[0]!, health: 'healthy' },
      { ...eps[2]!, health: 'healthy' },
    ]);
    assert.deepEqual(prioritiesSent(), [0, 0, 1, undefined, undefined, undefined]);
  });

  it('over random adds, removes, health flips and weights, every entry matches a fresh build', () => {
    const random = rng(11);
    const locs = ['r1/z1/s1', 'r1/z1/s2', 'r1/z2/s1', 'r2/z1/s1', 'r2/z3/s3', 'r3/z1/s1'];
    const clients = ['r1/z1/s1', 'r1/z2/s1', 'r2/z3/s3', 'r9/z9/s9'].map((l) => client({ locality: l }));
    for (const min of [1, 4, 9]) {
      let endpoints = Array.from({ length: 24 }, (_, i) => ep({ locality: locs[i % locs.length]! }));
      const mesh = new Mesh();
      mesh.put(service('svc', endpoints, capped(min)));
      const cache = serverClaCache();
      for (let step = 0; step < 150; step++) {
        const i = Math.floor(random() * endpoints.length);
        const e = endpoints[i]!;
        const op = Math.floor(random() * 4);
        if (op === 0) endpoints = [...endpoints, ep({ locality: locs[Math.floor(random() * locs.length)]! })];
        else if (op === 1 && endpoints.length > 6) endpoints = endpoints.filter((_, k) => k !== i);
        else if (op === 2)
          endpoints = endpoints.map((x, k) =>
            k === i ? { ...e, health: e.health === 'healthy' ? 'unhealthy' : 'healthy' } : x,
          );
        else endpoints = endpoints.map((x, k) => (k === i ? { ...e, weight: 1 + Math.floor(random() * 5) } : x));
        mesh.put(service('svc', endpoints, capped(min)));
        for (const c of clients) {
          const got = Buffer.from(flatten(cache.lookup(mesh.get('svc')!, c).bytes));
          assert.deepEqual(got, independentBytes(endpoints, capped(min), c), `min ${min}, step ${step}`);
        }
      }
      assert.ok(cache.stats().kept > 0, 'capped entries are kept across changes too while their key holds');
    }
  });
});

/** A deterministic PRNG, so a failure replays. */
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

describe('reach over random trees (property)', () => {
  const SCOPES: readonly (readonly Scope[])[] = [
    ['region', 'zone', 'subzone'],
    ['region', 'zone'],
    ['network', 'region', 'zone'],
  ];
  it('the capped CLA is a prefix by priority of the uncapped one, and holds >= N whenever it can', () => {
    const random = rng(3);
    const pick = (n: number) => Math.floor(random() * n);
    for (let round = 0; round < 300; round++) {
      const scopes = SCOPES[round % SCOPES.length]!;
      const count = 1 + pick(30);
      const eps = Array.from({ length: count }, () =>
        ep({
          network: `n${pick(2)}`,
          locality: `r${pick(3)}/z${pick(3)}/s${pick(2)}`,
          health: random() < 0.2 ? 'unhealthy' : 'healthy',
          weight: 1 + pick(3),
        }),
      );
      const min = 1 + pick(count + 2);
      const plain = stateOf(eps, lb('failover', scopes));
      const cut = stateOf(eps, capped(min, 'failover', scopes));
      const c = client({ network: `n${pick(3)}`, locality: `r${pick(4)}/z${pick(4)}/s${pick(3)}` });
      const full = claFor(plain, c).groups;
      const mine = claFor(cut, c).groups;
      const held = (gs: typeof full, upTo = Infinity) =>
        gs.filter((g) => g.priority <= upTo).reduce((n, g) => n + g.endpoints.length, 0);
      const last = Math.max(-1, ...mine.map((g) => g.priority));
      const at = `round ${round}: min ${min}, scopes ${scopes.join('/')}`;
      assert.deepEqual(
        mine,
        full.filter((g) => g.priority <= last),
        `${at}: a prefix by priority`,
      );
      if (held(full) >= min) assert.ok(held(mine) >= min, `${at}: holds at least min`);
      else assert.equal(mine.length, full.length, `${at}: fewer than min in all: everything`);
      if (last > 0) assert.ok(held(mine, last - 1) < min, `${at}: no tier past the one that reached min`);
      // The explain path (resolvePolicy) cuts at the same place.
      const explained = resolvePolicy('svc', cut.tree, cut.spec.loadBalancing, c);
      assert.deepEqual(
        explained.cla.groups.map((g) => [g.priority, g.endpoints.map(endpointKey)]),
        mine.map((g) => [g.priority, g.endpoints.map(endpointKey)]),
        `${at}: explain agrees`,
      );
    }
  });
});

describe('reach with a locality policy: the final priorities are cut', () => {
  it('failoverPriority labels rank first; whole priorities are kept until N, the rest left out with a reason', () => {
    const eps = [
      ep({ locality: 'r1/z1/s1', labels: { v: 'a' } }),
      ep({ locality: 'r2/z1/s1', labels: { v: 'a' } }),
      ep({ locality: 'r1/z1/s1', labels: { v: 'b' } }),
      ep({ locality: 'r2/z1/s1', labels: { v: 'b' } }),
    ];
    const policy = { failoverPriority: [{ scope: 'label:v' as const }] };
    const at = client({ locality: 'r1/z1/s1', labels: { v: 'a' } });
    const full = resolvePolicy('svc', stateOf(eps, { ...lb(), policy }).tree, { ...lb(), policy }, at);
    assert.deepEqual(ranks(full.cla, eps), [0, 1, 2, 3]);
    const s = stateOf(eps, { ...capped(2), policy });
    const out = resolvePolicy('svc', s.tree, s.spec.loadBalancing, at, { reasons: true });
    assert.deepEqual(ranks(out.cla, eps), [0, 1, undefined, undefined]);
    const left = out.verdicts.filter((v) => v.priority === null);
    assert.equal(left.length, 2);
    for (const v of left)
      assert.match(v.reason, /reach: left out, priorities 0-1 already hold 2 endpoints \(minEndpoints 2\)/);
    // The server cache serves the same cut.
    const entry = serverClaCache().lookup(s, at);
    assert.deepEqual(ranks(entry.cla, eps), [0, 1, undefined, undefined]);
  });
});
