/**
 * The node's own deepest bucket (canopy_svc.here), table-driven over a small
 * tree: which node the projection names for each node placement and mode,
 * and a service whose layout is unknown losing its projection.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MODE, pathHash, valueHash } from '../src/agent/abi.js';
import { readSvcValue, svcValue } from '../src/agent/abi-svc.js';
import { freshBucket } from '../src/agent/bucket.js';
import { hereOf, reproject, type HereSource } from '../src/agent/here-bucket.js';
import { parseLocality, type Placement } from '../src/domain/locality.js';

const at = (l: string): Placement => ({ locality: parseLocality(l), network: '', node: '', cluster: '', labels: {} });

/** Nodes of r1, r1/z1 and r1/z1/s1 (the leaf with `leafCount` endpoints); level i's bucket at slot 10 * i. */
function source(mode: number, leafCount: number): HereSource {
  const nodes = new Map<string, { bucket: ReturnType<typeof freshBucket> }>();
  let h = 0n;
  ['r1', 'z1', 's1'].forEach((v, i) => {
    h = pathHash(h, valueHash(v));
    const n = i === 2 ? leafCount : 3;
    nodes.set(`${i + 1}:${h}`, {
      bucket: freshBucket({ start: 10 * (i + 1), length: n }, new Float64Array(n).fill(7), new Float64Array(n).fill(1)),
    });
  });
  return { mode, scopes: ['region', 'zone', 'subzone'], nodes };
}

describe("the node's deepest bucket", () => {
  const cases = [
    { what: 'the node leaf has backends', mode: MODE.failover, leaf: 2, node: 'r1/z1/s1', level: 3, base: 30 },
    { what: 'the node leaf is empty: its zone', mode: MODE.failover, leaf: 0, node: 'r1/z1/s1', level: 2, base: 20 },
    { what: 'another subzone: the zone', mode: MODE.failover, leaf: 2, node: 'r1/z1/s9', level: 2, base: 20 },
    { what: 'another region: none (the root)', mode: MODE.failover, leaf: 2, node: 'r9/z1/s1', level: 0 },
    { what: 'strict mode: the same walk', mode: MODE.strict, leaf: 2, node: 'r1/z1/s1', level: 3, base: 30 },
    { what: 'random mode: none', mode: MODE.random, leaf: 2, node: 'r1/z1/s1', level: 0 },
  ];
  for (const c of cases)
    it(c.what, () => {
      const here = hereOf(source(c.mode, c.leaf), at(c.node));
      assert.equal(here?.level ?? 0, c.level);
      if (c.base !== undefined) assert.equal(here?.bucket.base, c.base);
    });

  it('no node placement: none', () => {
    assert.equal(hereOf(source(MODE.failover, 2), undefined), undefined);
  });

  it('reproject: the new node is projected; a service without a layout loses its projection', () => {
    const base = { tree: 4, mode: MODE.failover, depth: 3, levelScope: [0, 1, 2] };
    const root = { base: 1, split: 9, base2: 0, count: 9, total: 9 };
    const old = svcValue({ ...base, root, here: { level: 3, bucket: { ...root, base: 30, count: 2 } } });
    const key = Buffer.from([1]);
    const [moved] = reproject([{ key, value: old, layout: source(MODE.failover, 2) }], at('r1/z1/s9'));
    assert.equal(readSvcValue(moved!.value).here?.level, 2);
    assert.deepEqual(readSvcValue(moved!.value).root, root);
    const [cleared] = reproject([{ key, value: old }], at('r1/z1/s1'));
    assert.equal(readSvcValue(cleared!.value).here, undefined);
    assert.deepEqual(reproject([{ key, value: moved!.value, layout: source(MODE.failover, 2) }], at('r1/z1/s9')), []);
  });
});
