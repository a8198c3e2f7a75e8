/**
 * The compiled tree carries the load plan (issue 20, the kernel path): a
 * load-aware service's LocalityTree resource holds, per client node, the
 * same priority-0 weights its CLA gets, by index into the tree's nodes; the
 * agent turns them into canopy_spill entries keyed by the node's level and
 * path hash. An unchanged plan gives unchanged bytes.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import protobuf from 'protobufjs';
import { readSpillKey, SPILL_LAYOUT } from '../src/agent/abi-spill.js';
import { pathHash, valueHash } from '../src/agent/abi.js';
import { spillEntries } from '../src/agent/spill-plan.js';
import { EMPTY_LOAD_PLAN, planLoad, type LoadPlanState } from '../src/domain/load/load-plan.js';
import { Mesh } from '../src/domain/mesh.js';
import type { ServiceSpec } from '../src/domain/service.js';
import { localityTreeType } from '../src/resources/locality-tree.js';
import type { ResourceType } from '../src/resources/resource-type.js';
import { decodeLocalityTree, encodeLocalityTree, tryDecodeLocalityTree } from '../src/resources/tree-codec.js';
import { client, ep, lb, service } from './support/builders.js';

/** The LocalityTree bytes inside the resource's google.protobuf.Any. */
function treeBytes(type: ResourceType): Uint8Array {
  const rd = protobuf.Reader.create(type.resolve('echo', undefined as never)!.any as Uint8Array);
  while (rd.pos < rd.len) {
    const tag = rd.uint32();
    if (tag >>> 3 === 2) return rd.bytes();
    rd.skipType(tag & 7);
  }
  throw new Error('no value in the Any');
}

function loadAwareSpec(): ServiceSpec {
  const eps = ['r1/za/s', 'r1/za/s', 'r1/zb/s', 'r1/zb/s', 'r2/zc/s', 'r2/zc/s'].map((locality) => ep({ locality }));
  return {
    ...service('echo', eps, {
      ...lb('failover'),
      loadAware: { balancing: 'waterfall', capacityRps: 30, utilizationTarget: 1, drainBelow: 0.25 },
    }),
    vip: '10.96.0.10',
    port: 80,
  };
}

/** Runs the plan for `ticks` intervals with zone A's clients offering `rps`; applies it as the controller does. */
function plan(mesh: Mesh, rps: number, ticks: number, from: LoadPlanState = EMPTY_LOAD_PLAN): LoadPlanState {
  const s = mesh.get('echo')!;
  let state = from;
  for (let i = 0; i < ticks; i++) {
    const r = planLoad(s, [{ path: ['r1', 'za', 's'], rps }], state);
    state = r.state;
    if (r.changed || s.load !== state.load) s.setLoad(state.load);
  }
  return state;
}

describe('LocalityTree carries the load plan', () => {
  it('a client node gets the leaves and weights priority 0 of its CLA has', () => {
    const mesh = new Mesh();
    mesh.put(loadAwareSpec());
    const type = localityTreeType(mesh);
    const plain = decodeLocalityTree(treeBytes(type));
    assert.equal(plain.loadAware, true);
    assert.equal(plain.spills, undefined, 'no plan yet: no spill');

    const state = plan(mesh, 120, 6);
    const s = mesh.get('echo')!;
    const tree = decodeLocalityTree(treeBytes(type));
    assert.equal(tree.spills?.length, 1);
    const spill = tree.spills![0]!;
    const path = (i: number): string => {
      const out: string[] = [];
      for (let n = i; n > 0; n = tree.nodes[n]!.parent) out.unshift(tree.nodes[n]!.value);
      return out.join('/');
    };
    assert.equal(path(spill.node), 'r1/za/s');
    const nodeA = s.tree.matchPlacement(client({ locality: 'r1/za/s' }));
    const weights = s.load!.weights.get(nodeA.id)!;
    const byPath = new Map([...s.tree.root.leaves(s.tree.levels)].map((l) => [l.id, l.path().join('/')]));
    const expected = Object.fromEntries([...weights].map(([leaf, w]) => [byPath.get(leaf), w]));
    assert.deepEqual(Object.fromEntries(spill.leaves.map((l, j) => [path(l), spill.weights[j]])), expected);
    assert.ok((expected['r1/zb/s'] ?? 0) > 0, `zone A's excess spills to zone B: ${JSON.stringify(expected)}`);
    assert.equal(expected['r2/zc/s'], undefined, 'nothing to the far region while B has room');
    assert.ok(state.epoch > 0);
  });

  it('an unchanged plan gives unchanged bytes; a new plan new bytes', () => {
    const mesh = new Mesh();
    mesh.put(loadAwareSpec());
    const type = localityTreeType(mesh);
    const s = mesh.get('echo')!;
    const state = plan(mesh, 120, 8);
    const before = Buffer.from(treeBytes(type));
    // The same weights under a new generation (what a re-push does): the same bytes.
    s.setLoad(s.load);
    const again = Buffer.from(treeBytes(type));
    assert.ok(before.equals(again));
    plan(mesh, 10, 12, state);
    const after = Buffer.from(treeBytes(type));
    assert.ok(!before.equals(after), 'the load dropped: the plan and the bytes change');
  });

  it('the agent keys each spill by the service and the client node, targets by level and path hash', () => {
    const mesh = new Mesh();
    mesh.put(loadAwareSpec());
    plan(mesh, 120, 6);
    const tree = decodeLocalityTree(treeBytes(localityTreeType(mesh)));
    const entries = spillEntries(tree);
    assert.equal(entries.length, 1);
    const key = readSpillKey(entries[0]!.key);
    const h = ['r1', 'za', 's'].reduce((p, v) => pathHash(p, valueHash(v)), 0n);
    assert.deepEqual(key, { vip: 0x0a60000a, port: 80, level: 3, path: h });
    assert.equal(entries[0]!.value.length, SPILL_LAYOUT.canopy_spill.size);
  });

  it('a spill naming something other than a leaf is refused with its field', () => {
    const mesh = new Mesh();
    mesh.put(loadAwareSpec());
    const s = mesh.get('echo')!;
    // nodes[1] is region r1, not a leaf.
    const bytes = encodeLocalityTree(s.spec, s.tree.compile(), [{ node: 0, leaves: [1], weights: [5] }]);
    const r = tryDecodeLocalityTree(bytes);
    assert.equal(r.ok, false);
    assert.match((r as { error: string }).error, /spills\[0\]\.leaves\[0\] 1 is not a leaf/);
  });
});
