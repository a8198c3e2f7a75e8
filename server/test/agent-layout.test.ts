/**
 * The buckets a plan leaves in the maps hold exactly each node's subtree, with
 * its weights, after any sequence of one-endpoint changes edited in: the
 * plans' writes are applied to an in-memory model of the maps, and every
 * node's bucket is read back the way the kernel reads it.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { LAYOUT, readNode, type BucketValue } from '../src/agent/abi.js';
import { readSvcValue } from '../src/agent/abi-svc.js';
import { nodePaths } from '../src/agent/tree-shape.js';
import { plan, type AgentState, type Plan } from '../src/agent/planner.js';
import { SlotAllocator } from '../src/agent/slot-allocator.js';
import type { TreeMessage } from '../src/resources/tree-codec.js';

type Backend = { leaf: string; ip: number; weight: number };

/** A 2-level (region/zone) tree message from backends with a leaf "r/z" each. */
function treeOf(backends: readonly Backend[]): TreeMessage {
  const sorted = [...backends].sort((a, b) => (a.leaf < b.leaf ? -1 : a.leaf > b.leaf ? 1 : a.ip - b.ip));
  const nodes: { parent: number; value: string; start: number; end: number }[] = [
    { parent: 0, value: '', start: 0, end: sorted.length },
  ];
  let region = -1;
  let regionName = '';
  sorted.forEach((b, i) => {
    const [r, z] = b.leaf.split('/') as [string, string];
    if (r !== regionName) {
      nodes.push({ parent: 0, value: r, start: i, end: i });
      region = nodes.length - 1;
      regionName = r;
    }
    const last = nodes[nodes.length - 1]!;
    if (last.parent !== region || last.value !== z) nodes.push({ parent: region, value: z, start: i, end: i });
    nodes[region]!.end = i + 1;
    nodes[nodes.length - 1]!.end = i + 1;
  });
  return {
    service: 's',
    vip: 0x0a000001,
    port: 80,
    mode: 'failover',
    networkFirst: false,
    scopes: ['region', 'zone'],
    nodes,
    backends: sorted.map((b) => ({ ipv4: b.ip, port: 8080, weight: b.weight })),
  };
}

/** The maps, as the writes of plans leave them. */
class Maps {
  readonly slots = new Map<number, Buffer>();
  readonly nodes = new Map<string, Buffer>();
  svc: Buffer | undefined;

  apply(p: Plan): void {
    const vs = LAYOUT.canopy_backend.size;
    const ks = LAYOUT.canopy_node_key.size;
    const ns = LAYOUT.canopy_node.size;
    for (const f of p.fills) {
      for (let i = 0; i < f.endpoints.count; i++)
        this.slots.set(f.endpoints.keys.readUInt32LE(i * 4), f.endpoints.values.subarray(i * vs, (i + 1) * vs));
      for (let i = 0; i < f.nodes.count; i++)
        this.nodes.set(
          f.nodes.keys.subarray(i * ks, (i + 1) * ks).toString('hex'),
          f.nodes.values.subarray(i * ns, (i + 1) * ns),
        );
    }
    for (const pt of p.patches)
      for (const w of pt.writes) {
        if (w.map === 'endpoints') this.slots.set(w.key.readUInt32LE(0), w.value!);
        else if (w.map === 'services') this.svc = w.value!;
        else if (w.value) this.nodes.set(w.key.toString('hex'), w.value);
        else this.nodes.delete(w.key.toString('hex'));
      }
    for (const pub of p.publish) this.svc = pub.value;
  }

  /** A bucket's live entries as "ip:weight", read the kernel's way (Fenwick sums give the weights). */
  entries(b: BucketValue): string[] {
    const slot = (i: number) => (i < b.split ? b.base + i : b.base2 + (i - b.split));
    const fen = (i: number) => this.slots.get(slot(i))!.readUInt32LE(8);
    const prefix = (n: number) => {
      let s = 0;
      for (let j = n; j > 0; j -= j & -j) s += fen(j - 1);
      return s;
    };
    const out: string[] = [];
    for (let i = 0; i < b.count; i++) {
      const w = prefix(i + 1) - prefix(i);
      if (w > 0) out.push(`${this.slots.get(slot(i))!.readUInt32BE(0)}:${w}`);
    }
    assert.equal(prefix(b.count), b.total, 'the sums add up to the total');
    return out.sort();
  }

  node(tree: number, level: number, hash: bigint): BucketValue | undefined {
    const k = Buffer.alloc(LAYOUT.canopy_node_key.size);
    k.writeUInt32LE(tree, 0);
    k.writeUInt32LE(level, 4);
    k.writeBigUInt64LE(hash, 8);
    const v = this.nodes.get(k.toString('hex'));
    return v ? readNode(v) : undefined;
  }
}

function check(maps: Maps, t: TreeMessage): void {
  const svc = readSvcValue(maps.svc!);
  const want = (start: number, end: number) =>
    t.backends
      .slice(start, end)
      .map((b) => `${b.ipv4}:${b.weight}`)
      .sort();
  assert.deepEqual(maps.entries(svc.root), want(0, t.backends.length), 'root');
  const paths = nodePaths(t);
  for (let i = 1; i < t.nodes.length; i++) {
    const b = maps.node(svc.tree, paths.level[i]!, paths.hash[i]!);
    assert.ok(b, `nodes[${i}] has an entry`);
    assert.deepEqual(maps.entries(b), want(t.nodes[i]!.start, t.nodes[i]!.end), `nodes[${i}] ${t.nodes[i]!.value}`);
  }
}

const LEAVES = ['r1/z1', 'r1/z2', 'r2/z1', 'r3/z7'];
const change = fc.oneof(
  fc.record({ kind: fc.constant('remove' as const), at: fc.nat() }),
  fc.record({
    kind: fc.constant('add' as const),
    leaf: fc.constantFrom(...LEAVES),
    ip: fc.integer({ min: 1, max: 400 }),
  }),
  fc.record({ kind: fc.constant('move' as const), at: fc.nat(), leaf: fc.constantFrom(...LEAVES) }),
  fc.record({ kind: fc.constant('weight' as const), at: fc.nat(), weight: fc.integer({ min: 1, max: 9 }) }),
);

describe('agent layout: versions edited into buckets', () => {
  it("every bucket holds its node's subtree and weights after any sequence of one-endpoint changes", () => {
    fc.assert(
      fc.property(fc.array(change, { minLength: 1, maxLength: 30 }), (changes) => {
        let backends: Backend[] = Array.from({ length: 12 }, (_, i) => ({
          leaf: LEAVES[i % 3]!,
          ip: 1000 + i,
          weight: 1,
        }));
        let state: AgentState = {
          services: new Map(),
          allocator: new SlotAllocator(1 << 16),
          nextTree: 1,
          scopes: new Map(),
          nodesHeld: 0,
          limits: { services: 16, nodes: 1000 },
        };
        const maps = new Maps();
        let version = 0;
        const load = () => {
          const t = treeOf(backends);
          const p = plan(state, [{ tree: t, hash: String(version++) }]);
          assert.deepEqual(p.rejected, []);
          maps.apply(p);
          state = p.next;
          check(maps, t);
          return p;
        };
        load();
        for (const c of changes) {
          const used = new Set(backends.map((b) => b.ip));
          if (c.kind === 'remove' && backends.length > 1)
            backends = backends.filter((_, i) => i !== c.at % backends.length);
          if (c.kind === 'add' && !used.has(c.ip)) backends = [...backends, { leaf: c.leaf, ip: c.ip, weight: 1 }];
          if (c.kind === 'move')
            backends = backends.map((b, i) => (i === c.at % backends.length ? { ...b, leaf: c.leaf } : b));
          if (c.kind === 'weight')
            backends = backends.map((b, i) => (i === c.at % backends.length ? { ...b, weight: c.weight } : b));
          const p = load();
          assert.deepEqual([p.fills.length, p.patches.length <= 1], [0, true], 'edited in, never laid out afresh');
        }
      }),
      { numRuns: 150 },
    );
  });
});
