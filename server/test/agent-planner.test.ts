import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { LAYOUT, readSvcValue, SCOPE_FIRST_DYNAMIC, valueHash } from '../src/agent/abi.js';
import { plan, PlanError, type AgentState, type IncomingTree } from '../src/agent/planner.js';
import { SlotAllocator } from '../src/agent/slot-allocator.js';
import type { TreeMessage } from '../src/resources/tree-codec.js';

function tree(name: string, opts: Partial<Omit<TreeMessage, 'backends'>> & { backends?: number } = {}): IncomingTree {
  const n = opts.backends ?? 2;
  const t: TreeMessage = {
    service: name,
    vip: opts.vip ?? 0x0a000001,
    port: opts.port ?? 80,
    mode: opts.mode ?? 'failover',
    scopes: opts.scopes ?? ['region'],
    nodes: opts.nodes ?? [
      { parent: 0, value: '', start: 0, end: n },
      { parent: 0, value: 'r1', start: 0, end: n },
    ],
    backends: Array.from({ length: n }, (_, i) => ({ ipv4: 0x0a010000 + i, port: 8080, weight: 1 })),
  };
  return { tree: t, hash: JSON.stringify(t) };
}

function empty(capacity = 100): AgentState {
  return { services: new Map(), allocator: new SlotAllocator(capacity), nextTree: 1, scopes: new Map() };
}

describe('SlotAllocator', () => {
  it('allocates first fit and coalesces what is released', () => {
    const a = new SlotAllocator(10);
    const x = a.allocate(3)!;
    const y = a.allocate(3)!;
    const z = a.allocate(4)!;
    assert.deepEqual([x.start, y.start, z.start], [0, 3, 6]);
    assert.equal(a.allocate(1), undefined, 'full');
    a.release(y);
    assert.equal(a.allocate(4), undefined, 'a 3-slot hole does not fit 4');
    a.release(x);
    assert.deepEqual(a.freeRanges(), [{ start: 0, length: 6 }]);
    a.release(z);
    assert.deepEqual(a.freeRanges(), [{ start: 0, length: 10 }]);
    assert.equal(a.inUse, 0);
  });

  it('refuses a double release and a reservation of taken slots', () => {
    const a = new SlotAllocator(10);
    const r = a.allocate(5)!;
    a.release(r);
    assert.throws(() => a.release(r), /were not allocated/);
    a.reserve({ start: 2, length: 3 });
    assert.throws(() => a.reserve({ start: 4, length: 2 }), /not free/);
    assert.deepEqual(a.freeRanges(), [{ start: 0, length: 2 }, { start: 5, length: 5 }]);
  });

  it('a clone is independent', () => {
    const a = new SlotAllocator(10);
    const c = a.clone();
    c.allocate(10);
    assert.equal(a.inUse, 0);
  });
});

describe('planner', () => {
  it('fills a fresh range and tree id, then publishes with one write per service', () => {
    const p = plan(empty(), [tree('a', { backends: 3 }), tree('b', { vip: 0x0a000002 })]);
    assert.equal(p.fills.length, 2);
    assert.equal(p.publish.length, 2);
    assert.deepEqual(p.fills.map((f) => [f.endpoints.count, f.nodes.count]), [[3, 1], [2, 1]]);
    const [a, b] = p.publish.map((x) => readSvcValue(x.value));
    assert.deepEqual([a!.tree, a!.epBase, a!.epCount], [1, 0, 3]);
    assert.deepEqual([b!.tree, b!.epBase, b!.epCount], [2, 3, 2]);
    assert.equal(a!.depth, 1);
    assert.deepEqual(p.retire, []);
  });

  it('does nothing for an unchanged tree, and retires the old version of a changed one', () => {
    const first = plan(empty(), [tree('a')]);
    const same = plan(first.next, [tree('a')]);
    assert.equal(same.unchanged, 1);
    assert.deepEqual([same.fills.length, same.publish.length, same.retire.length], [0, 0, 0]);
    const changed = plan(first.next, [tree('a', { backends: 5 })]);
    assert.equal(changed.retire.length, 1);
    assert.equal(changed.retire[0]!.tree, 1);
    const v = readSvcValue(changed.publish[0]!.value);
    assert.equal(v.tree, 2);
    assert.equal(v.epBase, 2, 'the old range is still held (grace period): the new one comes after it');
  });

  it('unpublishes and retires a service that is gone', () => {
    const first = plan(empty(), [tree('a'), tree('b', { vip: 0x0a000002 })]);
    const p = plan(first.next, [tree('b', { vip: 0x0a000002 })]);
    assert.deepEqual(p.unpublish.map((u) => u.service), ['a']);
    assert.deepEqual(p.retire.map((r) => r.name), ['a']);
    assert.equal(p.next.services.size, 1);
  });

  it('never modifies the state it plans from', () => {
    const s = empty();
    plan(s, [tree('a')]);
    assert.equal(s.services.size, 0);
    assert.equal(s.allocator.inUse, 0);
    assert.equal(s.nextTree, 1);
  });

  it('keys nodes by (tree, parent id, value hash) with sub-ranges relative to the service', () => {
    const t = tree('a', {
      scopes: ['region', 'zone'],
      backends: 3,
      nodes: [
        { parent: 0, value: '', start: 0, end: 3 },
        { parent: 0, value: 'r1', start: 0, end: 2 },
        { parent: 1, value: 'z1', start: 0, end: 2 },
        { parent: 0, value: 'r2', start: 2, end: 3 },
        { parent: 3, value: 'z9', start: 2, end: 3 },
      ],
    });
    const f = plan(empty(), [t]).fills[0]!;
    const ks = LAYOUT.canopy_node_key.size;
    const vs = LAYOUT.canopy_node.size;
    const keys = Array.from({ length: f.nodes.count }, (_, i) => f.nodes.keys.subarray(i * ks, (i + 1) * ks));
    const vals = Array.from({ length: f.nodes.count }, (_, i) => f.nodes.values.subarray(i * vs, (i + 1) * vs));
    // z9 under r2 (node 3): key parent 3, value hash of z9; value id 4, start 2, count 1.
    assert.equal(keys[3]!.readUInt32LE(4), 3);
    assert.equal(keys[3]!.readBigUInt64LE(8), valueHash('z9'));
    assert.deepEqual([vals[3]!.readUInt32LE(0), vals[3]!.readUInt32LE(4), vals[3]!.readUInt32LE(8)], [4, 2, 1]);
  });

  it('assigns dynamic scope slots once and reuses them', () => {
    const p = plan(empty(), [tree('a', { scopes: ['label:app'] })]);
    assert.deepEqual(p.newScopes, [{ scope: 'label:app', slot: SCOPE_FIRST_DYNAMIC }]);
    assert.deepEqual(readSvcValue(p.publish[0]!.value).levelScope, [SCOPE_FIRST_DYNAMIC]);
    const again = plan(p.next, [tree('a', { scopes: ['label:app'], backends: 4 })]);
    assert.deepEqual(again.newScopes, []);
  });

  it('refuses what the kernel cannot serve, naming the service and field', () => {
    assert.throws(() => plan(empty(), [tree('a'), tree('b')]), (e: Error) => e instanceof PlanError && /service b: vip:port is also used by service a/.test(e.message));
    assert.throws(() => plan(empty(), [tree('a', { port: 0 })]), /service a: port 0/);
    assert.throws(() => plan(empty(), [tree('a', { vip: 0 })]), /service a: vip is 0.0.0.0/);
    assert.throws(() => plan(empty(4), [tree('a', { backends: 5 })]), /service a: endpoint map full: 5 slots needed, 4 free of 4/);
    const scopes = Array.from({ length: 9 }, (_, i) => `label:k${i}`);
    assert.throws(() => plan(empty(), [tree('a', { scopes })]), /scopes has 9 levels, at most 8/);
    const many = Array.from({ length: 14 }, (_, i) => tree(`s${i}`, { vip: 0x0a000100 + i, scopes: [`label:k${i}`] }));
    assert.throws(() => plan(empty(), many), /service s13: scopes\[0\] label:k13: no scope slot left/);
  });
});
