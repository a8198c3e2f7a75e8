/**
 * The node's own deepest bucket projected into the service value
 * (canopy_svc.here): a caller with the node's locality (a cgroup without a
 * workload entry) picks from it without a node lookup, so every change along
 * the node's path must reach it. Real connects from such a cgroup, through
 * edits that grow the node's leaf, empty it (the projection moves up a level)
 * and open it again, a change of the node's own locality, and the agent
 * without workload entries; the projection is read back from the map.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { MAP, svcKey } from '../server/src/agent/abi.js';
import { readSvcValue, SVC_LAYOUT } from '../server/src/agent/abi-svc.js';
import { loadAddon } from '../server/src/agent/bpf.js';
import { Datapath } from '../server/src/agent/datapath.js';
import type { ServiceSpec } from '../server/src/domain/service.js';
import { Connector, counts, idBackend, kernelEnv, testCgroup } from './support/kernel.js';
import {
  backendEndpoint,
  bulkEndpoints,
  editBackends,
  failoverSpec,
  placementOf,
  treeUpdate,
} from './support/kernel-fixtures.js';

const env = kernelEnv();
const VIP = '127.100.13.1';
const VIP_N = 0x7f640d01;
const PORT = 8113;
/** Real backends: [id, ip, locality]. */
const REAL = editBackends(13);
/** Other leaves, never connected to: the edits stay edits of a big tree. */
const BULK = bulkEndpoints(13, PORT, 500, 50);

function service(ids: readonly string[]): ServiceSpec {
  return failoverSpec('here', VIP, PORT, [...ids.map((id) => backendEndpoint(REAL, id, PORT)), ...BULK]);
}

describe("the node's deepest bucket in the service value follows every change", { skip: env.reason }, () => {
  let cg: ReturnType<typeof testCgroup>;
  let dp: Datapath;
  let plain: Connector;
  let other: string;
  const servers: Awaited<ReturnType<typeof idBackend>>[] = [];

  const load = (s: ServiceSpec) => {
    assert.deepEqual(dp.apply([treeUpdate(s)]).rejected, []);
  };
  const seen = async (n = 60) => {
    const r = await plain.connect(VIP, PORT, n);
    assert.deepEqual(r.errors, {}, 'no connect fails');
    return Object.keys(counts(r.ids)).sort();
  };
  /** The level the service value projects (0: none, connects walk). */
  const hereLevel = () => {
    const bpf = loadAddon();
    const fd = bpf.objGet(path.join(cg.pinDir, MAP.services));
    try {
      const v = Buffer.alloc(SVC_LAYOUT.canopy_svc.size);
      assert.ok(bpf.mapLookup(fd, svcKey({ vip: VIP_N, port: PORT }), v), 'the service is published');
      return readSvcValue(v).here?.level ?? 0;
    } finally {
      bpf.close(fd);
    }
  };

  before(async () => {
    cg = testCgroup('here');
    other = cg.child('other');
    dp = Datapath.open({ pinDir: cg.pinDir, cgroup: cg.dir, graceMs: 20 });
    // The node has a workload entry (another cgroup's): the caller takes the ancestor walk, then the node's.
    dp.setWorkloads(placementOf('r1/z1/s1'), [{ cgroup: other, placement: placementOf('r9/z9/s9') }]);
    for (const [id, ip] of REAL) servers.push(await idBackend(ip, PORT, id));
    plain = await Connector.start(cg.child('plain'));
  });

  after(async () => {
    plain?.close();
    for (const s of servers) await s.close();
    dp?.close({ detach: true, cgroup: cg.dir });
    cg?.cleanup();
  });

  it('edits along the node path, a new node locality and no workload entries: connects follow', async () => {
    load(service(['a1', 'a2', 'm1', 'n1']));
    const tree = dp.services()[0]!.tree;
    assert.equal(hereLevel(), 3, "the node's leaf is projected");
    assert.deepEqual(await seen(), ['a1', 'a2']);

    load(service(['a1', 'a2', 'a3', 'm1', 'n1'])); // the node's leaf grows (a second segment)
    assert.deepEqual(await seen(), ['a1', 'a2', 'a3']);

    load(service(['m1', 'n1'])); // the node's leaf is gone: its zone is the deepest with backends
    assert.equal(hereLevel(), 2);
    assert.deepEqual(await seen(), ['m1']);
    await dp.settle(); // the leaf's slots are freed and may be reused

    load(service(['a3', 'm1', 'n1'])); // the leaf opens again
    assert.equal(hereLevel(), 3);
    assert.deepEqual(await seen(), ['a3']);
    assert.equal(dp.services()[0]!.tree, tree, 'every version was edited in, not laid out afresh');

    dp.setWorkloads(placementOf('r9/z9/s9'), [{ cgroup: other, placement: placementOf('r1/z1/s1') }]);
    assert.deepEqual(await seen(), ['n1'], "the node's new locality");

    dp.setWorkloads(placementOf('r9/z9/s9'), []); // no workload entries: the cgroup is not read
    assert.deepEqual(await seen(), ['n1']);
    load(service(['a3', 'm1'])); // r9 is gone: the node's path has no backends, connects walk (to the root)
    assert.equal(hereLevel(), 0);
  });
});
