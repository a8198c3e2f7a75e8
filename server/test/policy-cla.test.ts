/** The locality policy over the tree: each feature, the CLA invariants, the cache key's bound, config and kernel marking. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ClaCache } from '../src/domain/cla-cache.js';
import type { Cla } from '../src/domain/cla.js';
import { formatLocality, type Placement, type Scope } from '../src/domain/locality.js';
import { Mesh } from '../src/domain/mesh.js';
import type { LocalityPolicy } from '../src/domain/policy.js';
import { resolvePolicy } from '../src/domain/policy-cla.js';
import { endpointKey, type Endpoint, type LbMode } from '../src/domain/service.js';
import { parseServiceSpec, serviceSpecToJson } from '../src/domain/spec.js';
import { decodeLocalityTree, encodeLocalityTree } from '../src/resources/tree-codec.js';
import { client, ep, lb, service } from './support/builders.js';

function resolve(
  endpoints: Endpoint[],
  policy: LocalityPolicy,
  who: Placement,
  mode: LbMode = 'failover',
  scopes?: readonly Scope[],
) {
  const mesh = new Mesh();
  mesh.put(service('s', endpoints, { ...lb(mode, scopes), policy }));
  const s = mesh.get('s')!;
  return resolvePolicy('s', s.tree, s.spec.loadBalancing, who, { reasons: true });
}

/** endpoint address → priority (absent = left out). */
function prios(cla: Cla): Record<string, number> {
  const out: Record<string, number> = {};
  for (const g of cla.groups) for (const e of g.endpoints) out[e.address] = g.priority;
  return out;
}

function assertValidCla(cla: Cla): void {
  const ps = [...new Set(cla.groups.map((g) => g.priority))].sort((a, b) => a - b);
  assert.deepEqual(
    ps,
    ps.map((_, i) => i),
    'no priority gap',
  );
  const seen = new Set<string>();
  const addrs = new Set<string>();
  for (const g of cla.groups) {
    assert.ok(g.weight >= 1, `weightless locality ${formatLocality(g.locality)}`);
    const k = `${g.priority}/${formatLocality(g.locality)}`;
    assert.ok(!seen.has(k), `duplicate (locality, priority) ${k}`);
    seen.add(k);
    for (const e of g.endpoints) {
      assert.ok(!addrs.has(endpointKey(e)), `duplicate address ${endpointKey(e)}`);
      addrs.add(endpointKey(e));
    }
  }
}

const A = (a: string, locality: string, init: Parameters<typeof ep>[0] = {}) => ep({ address: a, locality, ...init });

describe('locality policy features', () => {
  it('explicit failover order: named regions first, in order; the rest last', () => {
    const eps = [A('10.0.0.1', 'r1/z1/s1'), A('10.0.0.2', 'r2/z/s'), A('10.0.0.3', 'r3/z/s'), A('10.0.0.4', 'r4/z/s')];
    const policy: LocalityPolicy = {
      failover: {
        rules: [
          { from: ['r1'], to: { type: 'only', values: ['r3'] } },
          { from: ['r9'], to: { type: 'any', values: [] } },
          { to: { type: 'only', values: ['r2'] } },
        ],
        unmatched: 'last',
      },
    };
    const got = resolve(eps, policy, client({ locality: 'r1/z1/s1' }));
    assert.deepEqual(prios(got.cla), { '10.0.0.1': 0, '10.0.0.3': 1, '10.0.0.2': 2, '10.0.0.4': 3 });
    assertValidCla(got.cla);
    const dropped = resolve(
      eps,
      { failover: { ...policy.failover!, unmatched: 'drop' } },
      client({ locality: 'r1/z1/s1' }),
    );
    assert.deepEqual(prios(dropped.cla), { '10.0.0.1': 0, '10.0.0.3': 1, '10.0.0.2': 2 });
    assert.match(dropped.verdicts.find((v) => v.endpoint.address === '10.0.0.4')!.reason, /no failover rule/);
  });

  it('failoverPriority: network first, then labels; key=value compares with the constant', () => {
    const eps = [
      A('10.0.1.1', 'r/z/s', { network: 'n1', labels: { team: 'a' } }),
      A('10.0.1.2', 'r/z/s', { network: 'n1', labels: { team: 'b' } }),
      A('10.0.1.3', 'r/z/s', { network: 'n2', labels: { team: 'a' } }),
      A('10.0.1.4', 'r/z/s', { network: 'n2', labels: { team: 'b' } }),
    ];
    const who = client({ network: 'n1', labels: { team: 'a' } });
    const got = resolve(eps, { failoverPriority: [{ scope: 'network' }, { scope: 'label:team' }] }, who, 'random');
    assert.deepEqual(prios(got.cla), { '10.0.1.1': 0, '10.0.1.2': 1, '10.0.1.3': 2, '10.0.1.4': 3 });
    assertValidCla(got.cla);
    const constant = resolve(eps, { failoverPriority: [{ scope: 'label:team', value: 'b' }] }, who, 'random');
    assert.deepEqual(prios(constant.cla), { '10.0.1.1': 1, '10.0.1.2': 0, '10.0.1.3': 1, '10.0.1.4': 0 });
    // Missing and empty client labels are the same value.
    const missing = resolve(eps, { failoverPriority: [{ scope: 'label:team' }] }, client(), 'random');
    const empty = resolve(
      eps,
      { failoverPriority: [{ scope: 'label:team' }] },
      client({ labels: { team: '' } }),
      'random',
    );
    assert.equal(missing.key, empty.key);
    assert.deepEqual(prios(missing.cla), prios(empty.cla));
  });

  it('failoverPriority combined with failover: label rank first, then the tree and the failover order', () => {
    const eps = [
      A('10.0.2.1', 'r1/z1/s1', { labels: { t: 'x' } }),
      A('10.0.2.2', 'r2/z1/s1', { labels: { t: 'x' } }),
      A('10.0.2.3', 'r1/z1/s1', { labels: { t: 'y' } }),
    ];
    const got = resolve(
      eps,
      {
        failoverPriority: [{ scope: 'label:t' }],
        failover: { rules: [{ from: ['r1'], to: { type: 'only', values: ['r2'] } }], unmatched: 'last' },
      },
      client({ locality: 'r1/z1/s1', labels: { t: 'x' } }),
    );
    assert.deepEqual(prios(got.cla), { '10.0.2.1': 0, '10.0.2.2': 1, '10.0.2.3': 2 });
  });

  it('distribute: weights per claimed locality, unclaimed localities dropped, no gaps', () => {
    const eps = [
      A('10.0.3.1', 'r1/z1/s1', { weight: 3 }),
      A('10.0.3.2', 'r1/z2/s1'),
      A('10.0.3.3', 'r1/z3/s1'),
      A('10.0.3.4', 'r2/z1/s1'),
    ];
    const got = resolve(
      eps,
      {
        distribute: [
          {
            from: 'r1/*',
            to: [
              { pattern: 'r1/z1', weight: 70 },
              { pattern: 'r1/*', weight: 30 },
            ],
          },
        ],
      },
      client({ locality: 'r1/z1/s1' }),
      'random',
    );
    const w = Object.fromEntries(got.cla.groups.map((g) => [formatLocality(g.locality), g.weight]));
    assert.deepEqual(w, { 'r1/z1/s1': 70, 'r1/z2/s1': 15, 'r1/z3/s1': 15 });
    assert.equal(got.verdicts.find((v) => v.endpoint.address === '10.0.3.4')!.priority, null);
    // A client no rule is from gets the plain tree.
    const other = resolve(
      eps,
      { distribute: [{ from: 'r1/*', to: [{ pattern: 'r1', weight: 100 }] }] },
      client({ locality: 'r2/z1/s1' }),
      'random',
    );
    assert.equal(other.cla.groups.length, 4);
    assertValidCla(got.cla);
  });

  it('affinity: default weights 900/90/9 inside the own leaf, others 1; remote tiers keep their weight', () => {
    const eps = [
      A('10.0.4.1', 'r/z1', { labels: { node: 'n1', az: 'a' } }),
      A('10.0.4.2', 'r/z1', { labels: { node: 'n2', az: 'a' } }),
      A('10.0.4.3', 'r/z1', { labels: { node: 'n2', az: 'b', rack: 'k' } }),
      A('10.0.4.4', 'r/z1', { labels: { node: 'n3' } }),
      A('10.0.4.5', 'r/z2', { weight: 5 }),
    ];
    const policy: LocalityPolicy = {
      affinity: [
        { scope: 'label:node', weight: 900 },
        { scope: 'label:az', weight: 90 },
        { scope: 'label:rack', weight: 9 },
      ],
    };
    const got = resolve(
      eps,
      policy,
      client({ locality: 'r/z1', labels: { node: 'n1', az: 'a', rack: 'k' } }),
      'failover',
      ['zone'],
    );
    const byAddr = Object.fromEntries(got.verdicts.map((v) => [v.endpoint.address, [v.priority, v.weight]]));
    assert.deepEqual(byAddr, {
      '10.0.4.1': [0, 900],
      '10.0.4.2': [0, 90],
      '10.0.4.3': [0, 9],
      '10.0.4.4': [0, 1],
      '10.0.4.5': [1, 5],
    });
    assertValidCla(got.cla);
  });

  it('trafficDistribution: node → zone → region when every endpoint has the level; otherwise that level is not used', () => {
    const eps = [
      A('10.0.5.1', 'r1/z1', { node: 'n1' }),
      A('10.0.5.2', 'r1/z1', { node: 'n2' }),
      A('10.0.5.3', 'r1/z2', { node: 'n3' }),
      A('10.0.5.4', 'r2/z3', { node: 'n4' }),
    ];
    const node: LocalityPolicy = { trafficDistribution: 'PreferSameNode' };
    const scopes: Scope[] = ['region', 'zone', 'node'];
    const here = resolve(eps, node, client({ locality: 'r1/z1', node: 'n1' }), 'failover', scopes);
    assert.deepEqual(prios(here.cla), { '10.0.5.1': 0, '10.0.5.2': 1, '10.0.5.3': 2, '10.0.5.4': 3 });
    // No endpoint on this node or zone: kube-proxy would go cluster-wide; Canopy falls back to the region.
    const away = resolve(eps, node, client({ locality: 'r1/z9', node: 'n9' }), 'failover', scopes);
    assert.deepEqual(prios(away.cla), { '10.0.5.1': 0, '10.0.5.2': 0, '10.0.5.3': 0, '10.0.5.4': 1 });
    // One endpoint without a node: the node level does not apply (kube-proxy: not every endpoint hinted).
    const partial = resolve(
      [...eps, A('10.0.5.5', 'r1/z1')],
      node,
      client({ locality: 'r1/z1', node: 'n1' }),
      'failover',
      scopes,
    );
    assert.deepEqual(prios(partial.cla), { '10.0.5.1': 0, '10.0.5.2': 0, '10.0.5.5': 0, '10.0.5.3': 1, '10.0.5.4': 2 });
    assert.match(partial.verdicts[0]!.reason, /node is not set on every endpoint/);
  });
});

describe('CLA cache under a policy', () => {
  it('distinct CLAs stay bounded by tree nodes × distinct label values read, and each equals a fresh resolve', () => {
    const eps: Endpoint[] = [];
    for (let r = 0; r < 3; r++)
      for (let z = 0; z < 3; z++)
        for (let i = 0; i < 4; i++)
          eps.push(A(`10.1.${r * 3 + z}.${i + 1}`, `r${r}/z${z}/s0`, { labels: { team: ['a', 'b', 'c'][i % 3]! } }));
    const mesh = new Mesh();
    const policy: LocalityPolicy = {
      failoverPriority: [{ scope: 'label:team' }],
      failover: { rules: [{ from: ['r0'], to: { type: 'only', values: ['r2'] } }], unmatched: 'last' },
    };
    mesh.put(service('s', eps, { ...lb('failover'), policy }));
    const s = mesh.get('s')!;
    const cache = new ClaCache((cla) =>
      new TextEncoder().encode(JSON.stringify(cla.groups.map((g) => [g.priority, g.weight]))),
    );
    const teams = ['a', 'b', 'c'];
    let n = 0;
    for (let r = 0; r < 5; r++)
      for (let z = 0; z < 5; z++)
        for (let sz = 0; sz < 3; sz++)
          for (const team of teams) {
            const who = client({ locality: `r${r}/z${z}/s${sz}`, labels: { team } });
            const entry = cache.lookup(s, who);
            const fresh = resolvePolicy('s', s.tree, s.spec.loadBalancing, who);
            assert.deepEqual(prios(entry.cla), prios(fresh.cla), `client ${r}/${z}/${sz} ${team}`);
            n++;
          }
    const entries = cache.entriesFor('s');
    assert.equal(n, 225);
    assert.ok(entries <= s.tree.nodeCount * teams.length, `${entries} entries > ${s.tree.nodeCount} nodes × 3 values`);
    assert.ok(entries < n, `${entries} entries for ${n} clients`);
  });

  it('invariants hold for every client: no gap, no weightless locality, no duplicate (locality, priority)', () => {
    const eps = [
      A('10.2.0.1', 'r1/z1/s1', { network: 'n1', labels: { t: 'a' } }),
      A('10.2.0.2', 'r1/z1/s1', { network: 'n2', labels: { t: 'b' } }),
      A('10.2.0.3', 'r1/z2/s1', { network: 'n1', labels: { t: 'a' } }),
      A('10.2.0.4', 'r2/z1/s1', { network: 'n2' }),
      A('10.2.0.5', 'r3/z1/s1', { network: 'n1', labels: { t: 'b' } }),
    ];
    const policies: LocalityPolicy[] = [
      { failoverPriority: [{ scope: 'network' }, { scope: 'label:t' }] },
      { failover: { rules: [{ to: { type: 'anyExcept', values: ['r2'] } }], unmatched: 'drop' } },
      {
        distribute: [
          {
            from: '*',
            to: [
              { pattern: 'r1/z1', weight: 60 },
              { pattern: 'r3', weight: 40 },
            ],
          },
        ],
        failoverPriority: [{ scope: 'label:t' }],
      },
      { affinity: [{ scope: 'label:t', weight: 50 }] },
    ];
    for (const policy of policies)
      for (const loc of ['r1/z1/s1', 'r1/z2/s1', 'r2/z1/s1', 'r9/z9/s9', ''])
        for (const t of ['a', 'b', '']) {
          const got = resolve(eps, policy, client({ locality: loc, network: 'n1', labels: { t } }));
          assertValidCla(got.cla);
        }
  });
});

describe('policy config', () => {
  const base = {
    name: 's',
    loadBalancing: {
      mode: 'failover',
      routingPreference: ['region', 'zone', 'subzone'],
      policy: {
        failover: { rules: [{ from: ['r1'], to: { type: 'only', values: ['r2'] } }], unmatched: 'last' },
        failoverPriority: ['network', 'label:team', 'label:tier=gold'],
        affinity: [{ scope: 'label:node' }, { scope: 'label:az' }, { scope: 'label:region' }],
      },
    },
    endpoints: [{ address: '10.0.0.1', port: 80 }],
  };

  it('round-trips, with Kuma default affinity weights filled in', () => {
    const parsed = parseServiceSpec(base);
    assert.ok(parsed.ok, JSON.stringify(!parsed.ok && parsed.errors));
    const json = serviceSpecToJson(parsed.value);
    const policy = (json['loadBalancing'] as { policy: { affinity: { weight: number }[] } }).policy;
    assert.deepEqual(
      policy.affinity.map((a) => a.weight),
      [900, 90, 9],
    );
    const again = parseServiceSpec(json);
    assert.ok(again.ok);
    assert.deepEqual(serviceSpecToJson(again.value), json);
  });

  it('reports bad policy fields with their paths', () => {
    const bad = parseServiceSpec({
      ...base,
      loadBalancing: {
        mode: 'strict',
        routingPreference: ['region'],
        policy: {
          failover: { rules: [{ to: { type: 'only' } }] },
          failoverPriority: ['nope'],
          distribute: [{ from: 'r1', to: { r2: 0 } }],
          affinity: [{ scope: 'label:x' }],
          trafficDistribution: 'PreferSameZone',
          extra: 1,
        },
      },
    });
    assert.ok(!bad.ok);
    const paths = bad.errors.map((e) => e.path);
    for (const p of [
      'loadBalancing.policy.extra',
      'loadBalancing.policy.failover.rules[0].to.values',
      'loadBalancing.policy.failoverPriority[0]',
      'loadBalancing.policy.distribute[0].to.r2',
      'loadBalancing.policy.failover',
      'loadBalancing.policy.affinity',
      'loadBalancing.policy.trafficDistribution',
    ])
      assert.ok(paths.includes(p), `${p} in ${paths.join(', ')}`);
  });

  it('the kernel tree names the policy features it cannot express', () => {
    const parsed = parseServiceSpec({ ...base, vip: '10.9.0.1', port: 80 });
    assert.ok(parsed.ok);
    const mesh = new Mesh();
    mesh.put(parsed.value);
    const t = decodeLocalityTree(encodeLocalityTree(parsed.value, mesh.get('s')!.tree.compile()));
    assert.deepEqual(t.unsupportedPolicy, ['failover', 'failoverPriority', 'affinity']);
    const plain = service('p', [ep({ locality: 'r/z1' })], {
      ...lb(),
      policy: { trafficDistribution: 'PreferSameZone' },
    });
    const spec = {
      ...plain,
      loadBalancing: { ...plain.loadBalancing, routingPreference: ['zone'] as Scope[] },
      vip: '10.9.0.2',
      port: 80,
    };
    mesh.put(spec);
    assert.equal(
      decodeLocalityTree(encodeLocalityTree(spec, mesh.get('p')!.tree.compile())).unsupportedPolicy,
      undefined,
    );
    // An endpoint without a zone: trafficDistribution skips the level, the kernel tree cannot.
    const partial = { ...spec, endpoints: [...spec.endpoints, ep({ locality: '' })] };
    mesh.put(partial);
    assert.deepEqual(decodeLocalityTree(encodeLocalityTree(partial, mesh.get('p')!.tree.compile())).unsupportedPolicy, [
      'trafficDistribution',
    ]);
  });
});
