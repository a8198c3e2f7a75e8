/**
 * Every kind of one-endpoint change is O(change) in the kernel: each is
 * edited into the buckets on the changed endpoint's path (the same tree id,
 * no full write) in a handful of map writes however big the service, and
 * real connects go where the new tree says. The service has 2,000 endpoints
 * (bulk ones in other leaves, never connected to) beside the real backends.
 * bench/kernel-agent.ts counts the same kinds at 100k endpoints.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Datapath } from '../server/src/agent/datapath.js';
import type { Placement } from '../server/src/domain/locality.js';
import type { Endpoint, ServiceSpec } from '../server/src/domain/service.js';
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
const VIP = '127.100.12.1';
const PORT = 8112;
/** Real backends: [id, ip, locality]. */
const REAL = editBackends(12);
/** Bulk endpoints in 100 other leaves: the service is big, the change is not. */
const BULK = bulkEndpoints(12, PORT, 2000, 100);

function ep(id: string, over: Partial<Endpoint> = {}): Endpoint {
  return { ...backendEndpoint(REAL, id, PORT), ...over };
}

function service(endpoints: readonly Endpoint[], extra: Partial<ServiceSpec> = {}): ServiceSpec {
  return { ...failoverSpec('kinds', VIP, PORT, [...endpoints, ...BULK]), ...extra };
}

describe('every kind of one-endpoint change is edited in, in the kernel', { skip: env.reason }, () => {
  let cg: ReturnType<typeof testCgroup>;
  let dp: Datapath;
  const callers: Record<string, string> = {};
  const conns: Record<string, Connector> = {};
  const servers: Awaited<ReturnType<typeof idBackend>>[] = [];

  const load = (s: ServiceSpec) => {
    const r = dp.apply([treeUpdate(s)]);
    assert.deepEqual(r.rejected, []);
    return r;
  };
  const seen = async (caller: string, n = 40) => {
    const r = await conns[caller]!.connect(VIP, PORT, n);
    assert.deepEqual(r.errors, {}, `${caller}: no connect fails`);
    return counts(r.ids);
  };
  /** The version is edited in: the same tree id, at most `bound` writes. */
  const edited = (r: ReturnType<typeof load>, tree: number, bound: number, what: string) => {
    assert.equal(dp.services()[0]!.tree, tree, `${what}: the same tree (edited, not laid out afresh)`);
    assert.ok(r.mapWrites <= bound, `${what}: ${r.mapWrites} map writes, at most ${bound}`);
  };

  before(async () => {
    cg = testCgroup('kinds');
    // Callers sit in network n0, where no backend is (the network-first case walks the merged tree).
    const at = (name: string, p: Placement) => ({
      cgroup: (callers[name] = cg.child(name)),
      placement: { ...p, network: 'n0' },
    });
    dp = Datapath.open({ pinDir: cg.pinDir, cgroup: cg.dir, graceMs: 20 });
    dp.setWorkloads(placementOf('r8/z8/s8'), [
      at('s1', placementOf('r1/z1/s1')),
      at('s2', placementOf('r1/z1/s2')),
      at('r9', placementOf('r9/z9/s9')),
    ]);
    for (const [id, ip] of REAL) servers.push(await idBackend(ip, PORT, id));
    for (const name of Object.keys(callers)) conns[name] = await Connector.start(callers[name]!);
  });

  after(async () => {
    for (const c of Object.values(conns)) c.close();
    for (const s of servers) await s.close();
    dp?.close({ detach: true, cgroup: cg.dir });
    cg?.cleanup();
  });

  it('adding to a full leaf, moving between leaves, a new locality: a few writes each, connects follow', async () => {
    load(service([ep('a1'), ep('a2'), ep('m1')]));
    const tree = dp.services()[0]!.tree;
    assert.deepEqual(Object.keys(await seen('s1')).sort(), ['a1', 'a2']);

    // r1/z1/s1 is full (2 slots): a3 goes into a second segment of each bucket on its path.
    const added = load(service([ep('a1'), ep('a2'), ep('a3'), ep('m1')]));
    edited(added, tree, 8, 'add to a full leaf');
    assert.deepEqual(Object.keys(await seen('s1')).sort(), ['a1', 'a2', 'a3']);

    // a3 moves to r1/z1/s2: out of s1's bucket, into s2's; r1 and r1/z1 keep it.
    const moved = load(service([ep('a1'), ep('a2'), ep('a3', placementOf('r1/z1/s2')), ep('m1')]));
    edited(moved, tree, 4, 'move between leaves');
    assert.deepEqual(Object.keys(await seen('s1')).sort(), ['a1', 'a2']);
    assert.deepEqual(Object.keys(await seen('s2')).sort(), ['a3', 'm1']);

    // n1 opens r9/z9/s9: three fresh nodes with one slot each, and the root.
    const opened = load(service([ep('a1'), ep('a2'), ep('a3', placementOf('r1/z1/s2')), ep('m1'), ep('n1')]));
    edited(opened, tree, 8, 'new locality');
    assert.deepEqual(await seen('r9', 10), { n1: 10 });
  });

  it('weights: a weight change, and a health flip while weighted, in the Fenwick sums of each bucket', async () => {
    dp.apply([]);
    await dp.settle();
    load(service([ep('a1'), ep('a2'), ep('m1')]));
    const tree = dp.services()[0]!.tree;
    const heavy = load(service([ep('a1', { weight: 9 }), ep('a2'), ep('m1')]));
    edited(heavy, tree, 100, 'weight change');
    const split = await seen('s1', 200);
    assert.deepEqual(Object.keys(split).sort(), ['a1', 'a2']);
    assert.ok(split['a1']! > 3 * split['a2']!, `9:1 over real connects: ${JSON.stringify(split)}`);

    const flipped = load(service([ep('a1', { weight: 9 }), ep('m1')]));
    edited(flipped, tree, 100, 'health flip while weighted');
    assert.deepEqual(await seen('s1'), { a1: 40 });
    const back = load(service([ep('a1', { weight: 9 }), ep('a2', { weight: 3 }), ep('m1')]));
    edited(back, tree, 100, 'back with another weight');
    assert.deepEqual(Object.keys(await seen('s1', 100)).sort(), ['a1', 'a2']);
  });

  it('a network-first service: a health flip is edited into both trees', async () => {
    const nf = (eps: Endpoint[]) =>
      service(
        eps.map((e) => ({ ...e, network: 'n1' })),
        {
          endpoints: [...eps.map((e) => ({ ...e, network: 'n1' })), ...BULK.map((e) => ({ ...e, network: 'n2' }))],
          loadBalancing: {
            mode: 'failover',
            routingPreference: ['network', 'region', 'zone', 'subzone'],
            crossNetworkFailover: true,
            overprovisioningFactor: 140,
          },
        },
      );
    dp.apply([]);
    await dp.settle();
    // The callers' network (n0) has no backends: they walk the merged tree, where r1/z1/s1 holds a1, a2.
    load(nf([ep('a1'), ep('a2'), ep('m1')]));
    const tree = dp.services()[0]!.tree;
    assert.deepEqual(Object.keys(await seen('s1')).sort(), ['a1', 'a2']);
    const flip = load(nf([ep('a1'), ep('m1')]));
    edited(flip, tree, 16, 'network-first health flip');
    assert.deepEqual(await seen('s1'), { a1: 40 });
  });
});
