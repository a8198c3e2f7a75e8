import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { LAYOUT, pathHash, readNode, SCOPE_FIRST_DYNAMIC, valueHash } from '../src/agent/abi.js';
import { readSvcValue } from '../src/agent/abi-svc.js';
import { plan, type AgentState, type IncomingTree } from '../src/agent/planner.js';
import { SlotAllocator } from '../src/agent/slot-allocator.js';
import type { TreeMessage } from '../src/resources/tree-codec.js';

function tree(name: string, opts: Partial<Omit<TreeMessage, 'backends'>> & { backends?: number } = {}): IncomingTree {
  const n = opts.backends ?? 2;
  const t: TreeMessage = {
    service: name,
    vip: opts.vip ?? 0x0a000001,
    port: opts.port ?? 80,
    mode: opts.mode ?? 'failover',
    networkFirst: opts.networkFirst ?? false,
    scopes: opts.scopes ?? ['region'],
    nodes: opts.nodes ?? [
      { parent: 0, value: '', start: 0, end: n },
      { parent: 0, value: 'r1', start: 0, end: n },
    ],
    backends: Array.from({ length: n }, (_, i) => ({ ipv4: 0x0a010000 + i, port: 8080, weight: 1 })),
  };
  return { tree: t, hash: JSON.stringify(t) };
}

function empty(capacity = 100, limits = { services: 4096, nodes: 1000 }): AgentState {
  return {
    services: new Map(),
    allocator: new SlotAllocator(capacity),
    nextTree: 1,
    scopes: new Map(),
    nodesHeld: 0,
    limits,
  };
}

const details = (p: ReturnType<typeof plan>) => p.rejected.map((r) => r.detail);

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
    assert.deepEqual(a.freeRanges(), [
      { start: 0, length: 2 },
      { start: 5, length: 5 },
    ]);
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
    assert.deepEqual(
      p.fills.map((f) => [f.endpoints.count, f.nodes.count]),
      [
        [6, 1],
        [4, 1],
      ],
    );
    const [a, b] = p.publish.map((x) => readSvcValue(x.value));
    // Every node has a bucket of its own: the root's 3 slots, then r1's 3.
    assert.deepEqual([a!.tree, a!.root.base, a!.root.count], [1, 0, 3]);
    assert.deepEqual([b!.tree, b!.root.base, b!.root.count], [2, 6, 2]);
    assert.equal(a!.depth, 1);
    assert.deepEqual(p.retire, []);
  });

  it('does nothing for an unchanged tree, and retires the old version of a changed one', () => {
    const first = plan(empty(), [tree('a')]);
    const same = plan(first.next, [tree('a')]);
    assert.equal(same.unchanged, 1);
    assert.deepEqual([same.fills.length, same.publish.length, same.retire.length], [0, 0, 0]);
    // Another mode is another shape: laid out afresh.
    const changed = plan(first.next, [tree('a', { backends: 5, mode: 'strict' })]);
    assert.equal(changed.retire.length, 1);
    assert.equal(changed.retire[0]!.tree, 1);
    const v = readSvcValue(changed.publish[0]!.value);
    assert.equal(v.tree, 2);
    assert.equal(v.root.base, 4, 'the old range is still held (grace period): the new one comes after it');
  });

  it('unpublishes and retires a service that is gone', () => {
    const first = plan(empty(), [tree('a'), tree('b', { vip: 0x0a000002 })]);
    const p = plan(first.next, [tree('b', { vip: 0x0a000002 })]);
    assert.deepEqual(
      p.unpublish.map((u) => u.service),
      ['a'],
    );
    assert.deepEqual(
      p.retire.map((r) => r.name),
      ['a'],
    );
    assert.equal(p.next.services.size, 1);
  });

  it('never modifies the state it plans from', () => {
    const s = empty();
    plan(s, [tree('a')]);
    assert.equal(s.services.size, 0);
    assert.equal(s.allocator.inUse, 0);
    assert.equal(s.nextTree, 1);
  });

  it('keys nodes by (tree, level, path hash), each with a bucket of its own', () => {
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
    // z9 under r2 (node 4): key level 2, the hash of the path r2/z9; value: its own bucket (slot 8, after
    // the root's 3, r1's 2, z1's 2 and r2's 1), one entry, id 4.
    assert.equal(keys[3]!.readUInt32LE(4), 2);
    assert.equal(keys[3]!.readBigUInt64LE(8), pathHash(pathHash(0n, valueHash('r2')), valueHash('z9')));
    const z9 = readNode(vals[3]!);
    assert.deepEqual([z9.id, z9.base, z9.split, z9.count, z9.total], [4, 8, 1, 1, 1]);
  });

  it('assigns dynamic scope slots once and reuses them', () => {
    const p = plan(empty(), [tree('a', { scopes: ['label:app'] })]);
    assert.deepEqual(p.newScopes, [{ scope: 'label:app', slot: SCOPE_FIRST_DYNAMIC }]);
    assert.deepEqual(readSvcValue(p.publish[0]!.value).levelScope, [SCOPE_FIRST_DYNAMIC]);
    const again = plan(p.next, [tree('a', { scopes: ['label:app'], backends: 4 })]);
    assert.deepEqual(again.newScopes, []);
  });

  it('rejects, service by service, what the kernel cannot serve, naming the service and field', () => {
    const dup = plan(empty(), [tree('a'), tree('b')]);
    assert.deepEqual(details(dup), ['service b: vip:port is also used by service a']);
    assert.deepEqual(
      dup.publish.map((x) => x.service),
      ['a'],
      'the valid one is still loaded',
    );
    assert.match(details(plan(empty(), [tree('a', { port: 0 })]))[0]!, /service a: port 0/);
    assert.match(details(plan(empty(), [tree('a', { vip: 0 })]))[0]!, /service a: vip is 0.0.0.0/);
    assert.match(
      details(plan(empty(4), [tree('a', { backends: 5 })]))[0]!,
      /service a: endpoint map full: 10 slots needed, 4 free of 4/,
    );
    assert.match(
      details(plan(empty(100, { services: 1, nodes: 100 }), [tree('a'), tree('b', { vip: 2 })]))[0]!,
      /service b: service map full: 1 services/,
    );
    assert.match(
      details(plan(empty(100, { services: 10, nodes: 1 }), [tree('a'), tree('b', { vip: 2 })]))[0]!,
      /service b: node map full: 1 entries needed, 0 free of 1/,
    );
    const scopes = Array.from({ length: 9 }, (_, i) => `label:k${i}`);
    assert.match(details(plan(empty(), [tree('a', { scopes })]))[0]!, /scopes has 9 levels, at most 8/);
    const many = Array.from({ length: 14 }, (_, i) => tree(`s${i}`, { vip: 0x0a000100 + i, scopes: [`label:k${i}`] }));
    assert.deepEqual(details(plan(empty(), many)), [
      'service s13: scopes[0] label:k13: no scope slot left (13 dynamic scopes at most)',
    ]);
  });

  it('keeps the last good state of a rejected service, and of one named in keep', () => {
    const first = plan(empty(), [tree('a'), tree('b', { vip: 2 })]);
    const p = plan(first.next, [tree('a', { backends: 3 }), tree('b', { vip: 2, port: 0 })]);
    assert.deepEqual(p.unpublish, [], 'b is not removed');
    assert.deepEqual(
      [...p.publish, ...p.patches].map((x) => x.service),
      ['a'],
    );
    assert.equal([...p.next.services.values()].find((s) => s.name === 'b')?.tree, 2);
    const kept = plan(first.next, [tree('a')], new Set(['b']));
    assert.deepEqual(kept.unpublish, []);
  });

  it('gives back the scope slots of removed services (no leak under churn)', () => {
    let state = empty(200);
    for (let i = 0; i < 40; i++) {
      const p = plan(state, [tree(`s${i}`, { vip: 0x0a000100 + i, scopes: [`label:k${i}`] })]);
      assert.deepEqual(details(p), [], `round ${i}`);
      state = p.next;
    }
    assert.equal(state.scopes.size, 1);
  });
});
