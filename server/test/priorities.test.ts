import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ClaCache } from '../src/domain/cla-cache.js';
import { buildCla, prioritiesOf, type Cla } from '../src/domain/cla.js';
import type { Placement } from '../src/domain/locality.js';
import { Mesh, type ServiceState } from '../src/domain/mesh.js';
import { planFor } from '../src/domain/priorities.js';
import { endpointKey, type Endpoint, type LoadBalancing } from '../src/domain/service.js';
import { client, ep, lb, service } from './support/builders.js';

function claFor(s: ServiceState, c: Placement): Cla {
  return buildCla(s.name, s.tree, s.spec.loadBalancing, planFor(s.tree, s.spec.loadBalancing, c));
}

function stateOf(endpoints: Endpoint[], balancing: LoadBalancing = lb()): ServiceState {
  const mesh = new Mesh();
  mesh.put(service('svc', endpoints, balancing));
  const s = mesh.get('svc');
  assert.ok(s);
  return s;
}

/** endpoint index → priority (undefined when left out). */
function ranks(cla: Cla, endpoints: Endpoint[]): (number | undefined)[] {
  const byKey = new Map([...prioritiesOf(cla)].map(([e, p]) => [endpointKey(e), p]));
  return endpoints.map((e) => byKey.get(endpointKey(e)));
}

const LOCS = ['r1/z1/s1', 'r1/z1/s1', 'r1/z1/s2', 'r1/z2/s1', 'r2/z1/s1'];

describe('priorities by mode', () => {
  const table: { name: string; mode: LoadBalancing['mode']; at: string; want: (number | undefined)[] }[] = [
    { name: 'failover, full match', mode: 'failover', at: 'r1/z1/s1', want: [0, 0, 1, 2, 3] },
    { name: 'failover, zone match only', mode: 'failover', at: 'r1/z1/s9', want: [0, 0, 0, 1, 2] },
    { name: 'failover, compacts empty tiers', mode: 'failover', at: 'r2/z1/s1', want: [1, 1, 1, 1, 0] },
    { name: 'failover, no match at all', mode: 'failover', at: 'r9/z9/s9', want: [0, 0, 0, 0, 0] },
    {
      name: 'strict, full match',
      mode: 'strict',
      at: 'r1/z1/s2',
      want: [undefined, undefined, 0, undefined, undefined],
    },
    {
      name: 'strict, partial match gets nothing',
      mode: 'strict',
      at: 'r1/z1/s9',
      want: [undefined, undefined, undefined, undefined, undefined],
    },
    { name: 'random ignores locality', mode: 'random', at: 'r2/z1/s1', want: [0, 0, 0, 0, 0] },
  ];
  for (const c of table) {
    it(c.name, () => {
      const eps = LOCS.map((l) => ep({ locality: l }));
      const s = stateOf(eps, lb(c.mode));
      assert.deepEqual(ranks(claFor(s, client({ locality: c.at })), eps), c.want);
    });
  }

  it('groups by (locality, priority) once, weighted by the sum of endpoint weights', () => {
    const eps = [
      ep({ locality: 'r1/z1/s1', weight: 3 }),
      ep({ locality: 'r1/z1/s1', weight: 4 }),
      ep({ locality: 'r1/z1/s2', weight: 2 }),
    ];
    const cla = claFor(stateOf(eps), client({ locality: 'r1/z1/s1' }));
    assert.deepEqual(
      cla.groups.map((g) => [g.locality.subzone, g.priority, g.weight, g.endpoints.length]),
      [
        ['s1', 0, 7, 2],
        ['s2', 1, 2, 1],
      ],
    );
  });

  it('merges tree leaves that share an Envoy locality (label scopes) into one group', () => {
    const eps = [ep({ locality: 'r1/z1/s1', labels: { v: 'a' } }), ep({ locality: 'r1/z1/s1', labels: { v: 'b' } })];
    const cla = claFor(stateOf(eps, lb('random', ['region', 'label:v'])), client({}));
    assert.equal(cla.groups.length, 1);
    assert.equal(cla.groups[0]?.weight, 2);
  });

  it('unhealthy and draining endpoints are never in a CLA; failover moves to the next tier', () => {
    const eps = [
      ep({ locality: 'r1/z1/s1', health: 'unhealthy' }),
      ep({ locality: 'r1/z1/s1', health: 'draining' }),
      ep({ locality: 'r1/z1/s2' }),
      ep({ locality: 'r2/z1/s1' }),
    ];
    const cla = claFor(stateOf(eps), client({ locality: 'r1/z1/s1' }));
    assert.deepEqual(ranks(cla, eps), [undefined, undefined, 0, 1]);
  });

  it('network first: other networks rank by the remaining levels below the own network', () => {
    const eps = [
      ep({ network: 'n1', locality: 'r1/z1' }),
      ep({ network: 'n1', locality: 'r2/z1' }),
      ep({ network: 'n2', locality: 'r1/z1' }),
      ep({ network: 'n2', locality: 'r1/z2' }),
      ep({ network: 'n3', locality: 'r1/z1' }),
    ];
    const s = stateOf(eps, lb('failover', ['network', 'region', 'zone']));
    assert.deepEqual(ranks(claFor(s, client({ network: 'n1', locality: 'r1/z1' })), eps), [0, 1, 2, 3, 2]);
    const flat = stateOf(eps, { ...lb('failover', ['network', 'region', 'zone']), crossNetworkFailover: false });
    assert.deepEqual(ranks(claFor(flat, client({ network: 'n1', locality: 'r1/z1' })), eps), [0, 1, 2, 2, 2]);
  });
});

describe('ClaCache', () => {
  it('clients that match the same tree node share one entry and one encoding', () => {
    let encodes = 0;
    const cache = new ClaCache(() => {
      encodes++;
      return new Uint8Array([encodes]);
    });
    const s = stateOf(LOCS.map((l) => ep({ locality: l })));
    // Clients in 1,000 distinct localities: only the nodes they reach matter.
    const seen = new Set<Uint8Array>();
    for (let i = 0; i < 1000; i++) {
      const at = i % 3 === 0 ? `r1/z1/x${i}` : i % 3 === 1 ? `r1/x${i}/s1` : `x${i}/z1/s1`;
      seen.add(cache.lookup(s, client({ locality: at })).bytes);
    }
    // r1/z1 (zone match), r1 (region match), root (no match).
    assert.equal(seen.size, 3);
    assert.equal(encodes, 3);
    assert.deepEqual(cache.stats(), { hits: 997, misses: 3, entries: 3, kept: 0 });
    assert.ok(cache.entriesFor('svc') <= s.tree.nodeCount);
  });

  it('a change invalidates the service, keeps the count bounded, and forget drops it', () => {
    const cache = new ClaCache(() => new Uint8Array(1));
    const mesh = new Mesh();
    const eps = LOCS.map((l) => ep({ locality: l }));
    mesh.put(service('svc', eps));
    const s = () => mesh.get('svc') as ServiceState;
    const a = cache.lookup(s(), client({ locality: 'r1/z1/s1' }));
    mesh.put(service('svc', [...eps.slice(1)]));
    const b = cache.lookup(s(), client({ locality: 'r1/z1/s1' }));
    assert.notEqual(a, b);
    assert.ok(b.generation > a.generation);
    assert.equal(cache.stats().entries, 1);
    cache.forget('svc');
    assert.equal(cache.stats().entries, 0);
  });
});

describe('Mesh.put diffs endpoints', () => {
  it('reports only endpoints that changed, and nothing for an identical spec', () => {
    const mesh = new Mesh();
    const eps = LOCS.map((l) => ep({ locality: l }));
    assert.equal(mesh.put(service('svc', eps))?.kind, 'created');
    assert.equal(
      mesh.put(
        service(
          'svc',
          eps.map((e) => ({ ...e })),
        ),
      ),
      undefined,
    );
    const first = eps[0] as Endpoint;
    const change = mesh.put(service('svc', [{ ...first, health: 'unhealthy' }, ...eps.slice(1, 4)]));
    assert.deepEqual(change?.endpoints, [endpointKey(first), endpointKey(eps[4] as Endpoint)]);
    assert.equal(mesh.get('svc')?.tree.size, 3);
    assert.equal(mesh.get('svc')?.endpoints.size, 4);
  });
});

describe('Mesh.patch changes single endpoints', () => {
  it('touches only the named endpoints, and the spec reads back with the patch applied', () => {
    const mesh = new Mesh();
    const eps = LOCS.map((l) => ep({ locality: l }));
    mesh.put(service('svc', eps));
    const s = mesh.get('svc') as ServiceState;
    const gen = s.generation;
    const [first, second] = eps as [Endpoint, Endpoint];
    const added = ep({ locality: 'r9/z9/s9' });
    const change = mesh.patch('svc', [{ ...first, weight: 5 }, added], [endpointKey(second)]);
    assert.deepEqual(change?.endpoints, [endpointKey(first), endpointKey(added), endpointKey(second)]);
    assert.equal(s.generation, gen + 3);
    assert.equal(s.tree.get(endpointKey(first), first)?.weight, 5);
    assert.equal(s.tree.has(endpointKey(second), second), false);
    // The spec's list keeps the order of the rest, with the patched endpoint in place and the new one last.
    assert.deepEqual(
      s.spec.endpoints.map((e) => [endpointKey(e), e.weight]),
      [[endpointKey(first), 5], ...eps.slice(2).map((e) => [endpointKey(e), 1]), [endpointKey(added), 1]],
    );
    assert.equal(mesh.patch('svc', [{ ...first, weight: 5 }]), undefined, 'the same endpoint again changes nothing');
    assert.equal(mesh.patch('nope', [first]), undefined);
    // A later full put diffs against the patched state.
    assert.equal(mesh.put(service('svc', s.spec.endpoints)), undefined);
  });
});
