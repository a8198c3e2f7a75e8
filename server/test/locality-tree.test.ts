import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { LocalityTree } from '../src/domain/locality-tree.js';
import type { Scope } from '../src/domain/locality.js';
import { endpointKey } from '../src/domain/service.js';
import type { Endpoint } from '../src/domain/service.js';
import { client, ep } from './support/builders.js';

/** Inserts `e`, or replaces `previous` (the same key as last inserted) with it. */
const add = (t: LocalityTree, e: Endpoint, previous?: Endpoint): void => t.upsert(e, endpointKey(e), previous);
const drop = (t: LocalityTree, e: Endpoint) => t.remove(endpointKey(e), e);

const RZS: Scope[] = ['region', 'zone', 'subzone'];

describe('LocalityTree', () => {
  it('groups hierarchically: (r1,z1) and (r2,z1) are different zones', () => {
    const t = new LocalityTree(RZS);
    add(t, ep({ locality: 'r1/z1/s1' }));
    add(t, ep({ locality: 'r2/z1/s1' }));
    assert.equal(t.root.children.size, 2);
    assert.equal(t.match(['r1', 'z1', 's1']).path().join('/'), 'r1/z1/s1');
    assert.notEqual(t.match(['r1', 'z1']).id, t.match(['r2', 'z1']).id);
    assert.equal(t.nodeCount, 1 + 2 + 2 + 2);
  });

  it('keeps cached leaf lists right as leaves are added and pruned anywhere below', () => {
    const t = new LocalityTree(RZS);
    const a = ep({ locality: 'r1/z1/s1' });
    add(t, a);
    add(t, ep({ locality: 'r2/z1/s1' }));
    const names = (n = t.root) => n.leaves(t.levels).map((l) => l.path().join('/'));
    assert.deepEqual(names(), ['r1/z1/s1', 'r2/z1/s1']);
    const r1 = t.match(['r1']);
    assert.deepEqual(names(r1), ['r1/z1/s1']);
    const b = ep({ locality: 'r1/z1/s0' });
    add(t, b);
    assert.deepEqual(names(), ['r1/z1/s0', 'r1/z1/s1', 'r2/z1/s1'], 'a new leaf deep below invalidates the root');
    assert.deepEqual(names(r1), ['r1/z1/s0', 'r1/z1/s1']);
    drop(t, a);
    assert.deepEqual(names(), ['r1/z1/s0', 'r2/z1/s1'], 'a pruned leaf leaves every ancestor list');
    add(t, { ...b, weight: 5 }, b);
    assert.deepEqual(names(), ['r1/z1/s0', 'r2/z1/s1'], 'an update inside a leaf keeps the list');
  });

  it('match gives the deepest node on the path', () => {
    const t = new LocalityTree(RZS);
    add(t, ep({ locality: 'r1/z1/s1' }));
    add(t, ep({ locality: 'r1/z2/s1' }));
    const cases: [string[], string][] = [
      [['r1', 'z1', 's1'], 'r1/z1/s1'],
      [['r1', 'z1', 's9'], 'r1/z1'],
      [['r1', 'z9', 's1'], 'r1'],
      [['r9', 'z1', 's1'], ''],
      [[], ''],
    ];
    for (const [path, want] of cases) assert.equal(t.match(path).path().join('/'), want, path.join('/'));
  });

  it('a missing value reads as "" and is a value like any other', () => {
    const t = new LocalityTree(RZS);
    add(t, ep({ locality: 'r1' }));
    assert.equal(t.matchPlacement(client({ locality: 'r1' })).depth, 3);
    assert.equal(t.matchPlacement(client({ locality: 'r1/z1' })).depth, 1);
  });

  it('counts, removes and prunes empty branches', () => {
    const t = new LocalityTree(RZS);
    const a = ep({ locality: 'r1/z1/s1' });
    const b = ep({ locality: 'r1/z1/s2' });
    const c = ep({ locality: 'r2/z1/s1' });
    for (const e of [a, b, c]) add(t, e);
    assert.equal(t.size, 3);
    assert.equal(t.root.children.get('r1')?.count, 2);
    assert.ok(drop(t, b));
    assert.equal(t.root.children.get('r1')?.children.get('z1')?.children.has('s2'), false, 's2 pruned');
    assert.ok(drop(t, c));
    assert.equal(t.root.children.has('r2'), false, 'r2 pruned');
    assert.equal(t.nodeCount, 4);
    assert.equal(drop(t, c), false);
    assert.ok(drop(t, a));
    assert.equal(t.size, 0);
    assert.equal(t.nodeCount, 1);
  });

  it('update in place keeps the leaf; a moved endpoint changes leaf', () => {
    const t = new LocalityTree(RZS);
    const a = ep({ locality: 'r1/z1/s1', weight: 1 });
    add(t, a);
    const leaf = t.match(['r1', 'z1', 's1']);
    const heavier = { ...a, weight: 5 };
    add(t, heavier, a);
    assert.equal(t.match(['r1', 'z1', 's1']), leaf);
    assert.equal(t.get(endpointKey(a), a)?.weight, 5);
    assert.equal(t.size, 1);
    add(t, { ...a, locality: { region: 'r2', zone: 'z1', subzone: 's1' } }, heavier);
    assert.equal(t.size, 1);
    assert.equal(t.root.children.has('r1'), false);
    assert.equal(t.match(['r2', 'z1', 's1']).count, 1);
  });

  it('keeps endpoints in depth-first order: every subtree is one contiguous range', () => {
    const t = new LocalityTree(RZS);
    const locs = ['r2/z1/s1', 'r1/z2/s1', 'r1/z1/s2', 'r1/z1/s1', 'r2/z1/s1', 'r1/z1/s1', 'r3/z1/s1'];
    for (const l of locs) add(t, ep({ locality: l }));
    const compiled = t.compile();
    assert.equal(compiled.nodes.length, t.nodeCount);
    assert.equal(compiled.endpoints.length, 7);
    for (const [i, node] of compiled.nodes.entries()) {
      const inRange = compiled.endpoints.slice(node.start, node.end);
      assert.equal(inRange.length, node.end - node.start);
      // Every endpoint in the range lies under this node, and none outside it does.
      const prefix = pathOfNode(compiled.nodes, i);
      for (const e of compiled.endpoints) {
        const under = prefix.every((v, d) => [e.locality.region, e.locality.zone, e.locality.subzone][d] === v);
        assert.equal(inRange.includes(e), under, `node ${prefix.join('/')} range`);
      }
    }
  });

  it('compile is O(nodes + endpoints): k siblings take k node slots, not 2^k', () => {
    const t = new LocalityTree(RZS);
    for (let i = 0; i < 20; i++) add(t, ep({ locality: `r1/z1/s${i}` }));
    const c = t.compile();
    assert.equal(c.nodes.length, 1 + 1 + 1 + 20);
  });

  it('compile output depends on content only, not insertion order', () => {
    const eps = ['r2/z1/s1', 'r1/z2/s1', 'r1/z1/s2', 'r1/z1/s1'].map((l) => ep({ locality: l }));
    const a = new LocalityTree(RZS);
    const b = new LocalityTree(RZS);
    for (const e of eps) add(a, e);
    for (const e of [...eps].reverse()) add(b, e);
    assert.deepEqual(a.compile(), b.compile());
  });

  it('orders children and endpoints as `<` orders their keys, whatever the insertion order', () => {
    const byLess = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);
    const values = ['s1', 's10', 's2', 'S1', '', 'é', 'e\u0301', 'z', '\u{1d538}', '\uffee', '10', '9'];
    const hosts = ['10.0.0.10', '10.0.0.9', 'fd00::a', 'FD00::a', 'host-é.example', '\u{1d538}.example', '10.0.0.100'];
    let seed = 5;
    const random = (): number => (seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0) / 2 ** 32;
    for (let trial = 0; trial < 20; trial++) {
      const t = new LocalityTree(RZS);
      const held = new Map<string, Endpoint>();
      for (let i = 0; i < 40; i++) {
        const sub = values[Math.floor(random() * values.length)]!;
        const host = hosts[Math.floor(random() * hosts.length)]!;
        const e = ep({ locality: `r1/z1/${sub}`, address: host, port: 1 + Math.floor(random() * 20) });
        add(t, e, held.get(endpointKey(e)));
        held.set(endpointKey(e), e);
      }
      const zone = t.match(['r1', 'z1']);
      const kids = zone.orderedChildren().map((c) => c.value);
      assert.deepEqual(kids, [...kids].sort(byLess));
      assert.equal(kids.length, zone.children.size);
      for (const leaf of zone.orderedChildren()) {
        const keys = leaf.orderedEndpoints().map(endpointKey);
        assert.deepEqual(keys, [...leaf.endpoints.keys()].sort(byLess));
      }
    }
  });

  it('supports 8 levels with label scopes', () => {
    const scopes: Scope[] = ['network', 'region', 'zone', 'subzone', 'node', 'cluster', 'label:rack', 'label:version'];
    const t = new LocalityTree(scopes);
    const e = ep({
      locality: 'r1/z1/s1',
      network: 'n1',
      node: 'nd',
      cluster: 'c1',
      labels: { rack: 'k7', version: 'v2' },
    });
    add(t, e);
    add(
      t,
      ep({ locality: 'r1/z1/s1', network: 'n1', node: 'nd', cluster: 'c1', labels: { rack: 'k7', version: 'v1' } }),
    );
    const m = t.match(['n1', 'r1', 'z1', 's1', 'nd', 'c1', 'k7', 'v2']);
    assert.equal(m.depth, 8);
    assert.deepEqual([...t.endpointsOf(m)], [e]);
    assert.equal(t.match(['n1', 'r1', 'z1', 's1', 'nd', 'c1', 'k7', 'v3']).depth, 7);
    assert.throws(() => new LocalityTree([...scopes, 'label:x']), RangeError);
    assert.throws(() => new LocalityTree([]), RangeError);
  });
});

function pathOfNode(nodes: readonly { parent: number; value: string }[], i: number): string[] {
  const out: string[] = [];
  for (let n = nodes[i]; n && n.parent >= 0; n = nodes[n.parent]) out.push(n.value);
  return out.reverse();
}
