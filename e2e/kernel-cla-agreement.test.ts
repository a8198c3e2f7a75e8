/**
 * The kernel and the CLA agree: for random trees, clients and policies, the
 * backends the kernel program can pick for a client (every random number,
 * through BPF_PROG_TEST_RUN) are exactly the endpoints at priority 0 of that
 * client's CLA — network-first services included, where a client whose own
 * network has no endpoints is ranked by the remaining levels. Then the
 * network-first case again with real connects from a cgroup.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import { VERDICT } from '../server/src/agent/abi.js';
import { readTestCtx, testCtx } from '../server/src/agent/abi-test-run.js';
import { Datapath } from '../server/src/agent/datapath.js';
import type { Placement, Scope } from '../server/src/domain/locality.js';
import { Mesh } from '../server/src/domain/mesh.js';
import { planFor, tierEndpoints } from '../server/src/domain/priorities.js';
import type { Endpoint, LbMode, ServiceSpec } from '../server/src/domain/service.js';
import { contentHash } from '../server/src/resources/resource.js';
import { decodeLocalityTree, encodeLocalityTree, intToIpv4, ipv4ToInt } from '../server/src/resources/tree-codec.js';
import { Connector, counts, idBackend, kernelEnv, testCgroup } from './support/kernel.js';

const env = kernelEnv();
const VIP = '127.100.2.1';
const PORT = 8095;

interface Case {
  scopes: Scope[];
  mode: LbMode;
  crossNetworkFailover: boolean;
  endpoints: { network: string; region: string; zone: string }[];
  client: { network: string; region: string; zone: string };
}

const value = (prefix: string, n: number) => fc.integer({ min: 1, max: n }).map((i) => `${prefix}${i}`);
const where = fc.record({ network: value('n', 3), region: value('r', 3), zone: value('z', 2) });
const caseArb: fc.Arbitrary<Case> = fc.record({
  scopes: fc.constantFrom<Scope[]>(
    ['network', 'region', 'zone'],
    ['network', 'region'],
    ['region', 'zone'],
    ['network', 'zone', 'region'],
    ['region', 'network'],
  ),
  mode: fc.constantFrom<LbMode>('failover', 'failover', 'strict', 'random'),
  crossNetworkFailover: fc.boolean(),
  endpoints: fc.array(where, { minLength: 1, maxLength: 16 }),
  // values up to 4/4/3: a client may sit where no endpoint is
  client: fc.record({ network: value('n', 4), region: value('r', 4), zone: value('z', 3) }),
});

function placement(w: { network: string; region: string; zone: string }): Placement {
  return {
    locality: { region: w.region, zone: w.zone, subzone: '' },
    network: w.network,
    node: '',
    cluster: '',
    labels: {},
  };
}

function specOf(c: Case): ServiceSpec {
  return {
    name: 'prop',
    vip: VIP,
    port: PORT,
    loadBalancing: {
      mode: c.mode,
      routingPreference: c.scopes,
      crossNetworkFailover: c.crossNetworkFailover,
      overprovisioningFactor: 140,
    },
    endpoints: c.endpoints.map((w, i): Endpoint => ({
      address: `127.0.2.${i + 1}`,
      port: PORT,
      health: 'healthy',
      weight: 1,
      ...placement(w),
    })),
  };
}

describe('kernel picks = CLA priority 0', { skip: env.reason }, () => {
  let cg: ReturnType<typeof testCgroup>;
  let dp: Datapath;

  before(() => {
    cg = testCgroup('agree');
    dp = Datapath.open({ pinDir: cg.pinDir, cgroup: cg.dir, graceMs: 20 });
  });

  after(() => {
    dp?.close({ detach: true, cgroup: cg.dir });
    cg?.cleanup();
  });

  /** Loads the case's tree and the client's locality; returns the CLA's priority 0 and the kernel's picks. */
  function both(c: Case): { cla: string[] | 'refuse'; kernel: string[] | 'refuse' } {
    const mesh = new Mesh();
    const spec = specOf(c);
    mesh.put(spec);
    const st = mesh.get(spec.name)!;
    const bytes = encodeLocalityTree(st.spec, st.tree.compile());
    const r = dp.apply([{ tree: decodeLocalityTree(bytes), hash: contentHash(bytes) }]);
    assert.deepEqual(r.rejected, []);
    const client = placement(c.client);
    dp.setWorkloads(client, []);
    const tiers = planFor(st.tree, st.spec.loadBalancing, client).tiers;
    const cla =
      tiers.length === 0 ? 'refuse' : [...new Set(tierEndpoints(st.tree, tiers[0]!).map((e) => e.address))].sort();
    const picks = new Set<string>();
    for (let rand = 0; rand < c.endpoints.length; rand++) {
      const out = readTestCtx(dp.testRun(testCtx({ vip: ipv4ToInt(VIP)!, port: PORT, cgroup: 0n, rand })));
      if (out.verdict === VERDICT.refuse) return { cla, kernel: 'refuse' };
      assert.equal(out.verdict, VERDICT.rewrite);
      picks.add(intToIpv4(out.ip));
    }
    return { cla, kernel: [...picks].sort() };
  }

  it('for random trees, clients and policies (BPF_PROG_TEST_RUN)', () => {
    fc.assert(
      fc.property(caseArb, (c) => {
        const { cla, kernel } = both(c);
        assert.deepEqual(kernel, cla, JSON.stringify(c));
      }),
      { numRuns: 300 },
    );
  });

  it('a client whose network has no endpoints: the example from the issue', () => {
    const c: Case = {
      scopes: ['network', 'region'],
      mode: 'failover',
      crossNetworkFailover: true,
      endpoints: [
        { network: 'n1', region: 'r1', zone: 'z1' },
        { network: 'n1', region: 'r2', zone: 'z1' },
        { network: 'n2', region: 'r1', zone: 'z1' },
        { network: 'n2', region: 'r2', zone: 'z1' },
      ],
      client: { network: 'n3', region: 'r1', zone: 'z1' },
    };
    assert.deepEqual(both(c), { cla: ['127.0.2.1', '127.0.2.3'], kernel: ['127.0.2.1', '127.0.2.3'] });
  });

  it('real connects from a cgroup land in priority 0 only', async () => {
    const c: Case = {
      scopes: ['network', 'region', 'zone'],
      mode: 'failover',
      crossNetworkFailover: true,
      endpoints: [
        { network: 'n1', region: 'r1', zone: 'z1' },
        { network: 'n1', region: 'r2', zone: 'z1' },
        { network: 'n2', region: 'r1', zone: 'z2' },
        { network: 'n2', region: 'r1', zone: 'z1' },
      ],
      client: { network: 'n9', region: 'r1', zone: 'z1' },
    };
    const servers = await Promise.all(c.endpoints.map((_, i) => idBackend(`127.0.2.${i + 1}`, PORT, `e${i + 1}`)));
    const dir = cg.child('client');
    dp.setWorkloads(placement({ network: 'n0', region: 'r0', zone: 'z0' }), [
      { cgroup: dir, placement: placement(c.client) },
    ]);
    const conn = await Connector.start(dir);
    try {
      const mesh = new Mesh();
      mesh.put(specOf(c));
      const st = mesh.get('prop')!;
      const bytes = encodeLocalityTree(st.spec, st.tree.compile());
      dp.apply([{ tree: decodeLocalityTree(bytes), hash: contentHash(bytes) }]);
      const r = await conn.connect(VIP, PORT, 30);
      assert.deepEqual(r.errors, {});
      // n9 has nothing: r1/z1 in any network is priority 0 (e1 in n1, e4 in n2).
      assert.deepEqual(Object.keys(counts(r.ids)).sort(), ['e1', 'e4']);
    } finally {
      conn.close();
      for (const s of servers) await s.close();
    }
  });
});
