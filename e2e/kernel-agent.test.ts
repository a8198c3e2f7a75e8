/**
 * End to end, kernel half: `canopy serve` and `canopy agent` as real
 * processes, real TCP backends on loopback, workloads in cgroups. A health
 * change made through the admin API shows up in the kernel's choices; a
 * version the agent cannot load is NACKed and the maps keep the last good
 * one; a killed agent leaves the datapath serving and a new one resumes it.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startAgentProcess, type AgentProcess, type LogLine } from './support/agent-process.js';
import { startCanopyProcess, type CanopyProcess } from './support/canopy-process.js';
import { Connector, counts, idBackend, kernelEnv, testCgroup } from './support/kernel.js';

const env = kernelEnv();

const VIP = '127.100.0.2';
const PORT = 8081;
const BACKENDS = [
  { id: 'b1', address: '127.0.0.41', locality: { region: 'r1', zone: 'z1', subzone: 's1' } },
  { id: 'b2', address: '127.0.0.42', locality: { region: 'r1', zone: 'z1', subzone: 's2' } },
  { id: 'b3', address: '127.0.0.43', locality: { region: 'r2', zone: 'z1', subzone: 's1' } },
];

function service(name = 'web') {
  return {
    name,
    vip: VIP,
    port: PORT,
    loadBalancing: { mode: 'failover', routingPreference: ['region', 'zone', 'subzone'] },
    endpoints: BACKENDS.map((b) => ({ address: b.address, port: PORT, locality: b.locality })),
  };
}

const applied = (l: LogLine) => l.msg === 'tree version applied';

describe('canopy agent end to end', { skip: env.reason }, () => {
  let canopy: CanopyProcess;
  let agent: AgentProcess;
  let cg: ReturnType<typeof testCgroup>;
  let west: Connector;
  let east: Connector;
  const backends: Awaited<ReturnType<typeof idBackend>>[] = [];
  let agentArgs: string[];

  const onlyIds = async (c: Connector, n = 20) => {
    const r = await c.connect(VIP, PORT, n);
    assert.deepEqual(r.errors, {}, 'no failed connect');
    return counts(r.ids);
  };
  const ep = (b: (typeof BACKENDS)[number]) =>
    `/api/v1/services/web/endpoints/${encodeURIComponent(`${b.address}:${PORT}`)}`;

  before(async () => {
    cg = testCgroup('agent');
    const westDir = cg.child('west');
    cg.child('east');
    for (const b of BACKENDS) backends.push(await idBackend(b.address, PORT, b.id));
    canopy = await startCanopyProcess({ server: { debounceMs: 20 }, services: [service()] });
    agentArgs = [
      '--server',
      canopy.xdsUri,
      '--node-id',
      'node-1',
      '--region',
      'r1',
      '--zone',
      'z1',
      '--subzone',
      's1',
      '--cgroup',
      cg.dir,
      '--pin-dir',
      cg.pinDir,
      '--workload',
      'east=region=r2,zone=z1,subzone=s1',
      '--workload',
      'no-such-cgroup=region=r9',
      '--grace-ms',
      '100',
    ];
    agent = await startAgentProcess(agentArgs);
    await agent.waitForLog(applied);
    west = await Connector.start(westDir);
    east = await Connector.start(`${cg.dir}/east`);
  });

  after(async () => {
    west?.close();
    east?.close();
    await agent?.stop();
    await canopy?.stop();
    for (const b of backends) await b.close();
    // The last agent stopped cleanly, which leaves the datapath attached: detach it with the pins.
    const { Datapath } = await import('../server/src/agent/datapath.js');
    if (cg) {
      try {
        Datapath.open({ pinDir: cg.pinDir, cgroup: cg.dir }).close({ detach: true, cgroup: cg.dir });
      } catch {
        // nothing pinned
      }
      cg.cleanup();
    }
  });

  it('skips a --workload whose cgroup does not exist, with the reason, and keeps running', async () => {
    const skipped = agent.logs.find((l) => l.msg.startsWith('workload skipped'));
    assert.ok(skipped, 'the skip is logged');
    assert.match(String(skipped['cgroup']), /no-such-cgroup$/);
    assert.equal((await fetch(`${agent.metricsUrl}/healthz`)).status, 200, 'the agent is still running');
  });

  it('sends each workload to its nearest backends', async () => {
    assert.deepEqual(await onlyIds(west), { b1: 20 }, 'west uses the node locality r1/z1/s1');
    assert.deepEqual(await onlyIds(east), { b3: 20 }, 'east is r2/z1/s1 by its --workload entry');
  });

  it("a workload's locality applies to its descendant cgroups (pod → container)", async () => {
    const container = cg.child('east/container');
    const c = await Connector.start(container);
    try {
      assert.deepEqual(await onlyIds(c), { b3: 20 }, 'east/container has no entry: its ancestor east (r2) has');
    } finally {
      c.close();
    }
  });

  it('workloads can be added and removed while the agent runs (PUT /workloads)', async () => {
    const late = await Connector.start(cg.child('late'));
    const put = (workloads: string[]) =>
      fetch(`${agent.metricsUrl}/workloads`, {
        method: 'PUT',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ workloads }),
      });
    try {
      assert.deepEqual(await onlyIds(late), { b1: 20 }, 'not a workload yet: the node locality');
      const r = await put(['east=region=r2,zone=z1,subzone=s1', 'late=region=r2,zone=z1,subzone=s1']);
      assert.equal(r.status, 200, await r.clone().text());
      assert.deepEqual(await onlyIds(late), { b3: 20 }, 'added: r2');
      assert.equal((await put(['east=region=r2,zone=z1,subzone=s1'])).status, 200);
      assert.deepEqual(await onlyIds(late), { b1: 20 }, 'removed: the node locality again');
      assert.deepEqual(await onlyIds(east), { b3: 20 }, 'east untouched');
      const bad = await put(['late']);
      assert.equal(bad.status, 400);
      assert.match(((await bad.json()) as { error: string }).error, /must be CGROUP=k=v/);
    } finally {
      late.close();
    }
  });

  it('a health change through the admin API shows up in the kernel', async () => {
    const from = agent.logs.length;
    const r = await canopy.admin('PATCH', ep(BACKENDS[0]!), { health: 'unhealthy' });
    assert.equal(r.status, 200);
    await agent.waitForLog(applied, { from });
    assert.deepEqual(await onlyIds(west), { b2: 20 }, 'r1/z1/s1 has no healthy backend: r1/z1 next');
    const { clients } = (await canopy.admin('GET', '/debug/clients')).body as {
      clients: { nodeId: string; types: { typeUrl: string; versionSent: string; versionAcked: string }[] }[];
    };
    const tree = clients
      .find((c) => c.nodeId === 'node-1')
      ?.types.find((t) => t.typeUrl.endsWith('canopy.v1.LocalityTree'));
    assert.ok(tree, 'the agent is a client of the tree type');
    assert.equal(tree.versionAcked, tree.versionSent, 'the agent ACKed the version once it was in the maps');
  });

  it('a second service on the same VIP and port is refused before any agent sees it; the datapath keeps serving', async () => {
    // Neither the kernel nor an Envoy sidecar could tell the two apart: the admin API refuses it with the
    // field at fault (domain/outbound.ts), as config load does. The agent's own refusal of such a tree is
    // server/test/agent-planner.test.ts's; the server's record of a NACK, e2e/ads-protocol.test.ts's.
    const r = await canopy.admin('PUT', '/api/v1/services/web-copy', service('web-copy'));
    assert.equal(r.status, 400);
    assert.match(JSON.stringify(r.body), /"path":"vip"/);
    assert.equal((await canopy.admin('GET', '/api/v1/services/web-copy')).status, 404);
    assert.deepEqual(await onlyIds(west), { b2: 20 });
  });

  it('decodes only the trees that changed; /debug/state reports live endpoints, not slots', async () => {
    // Eight backends in one subzone: one leaving is edited into the buckets of its path.
    const sideEps = Array.from({ length: 8 }, (_, i) => ({
      address: `127.0.0.${51 + i}`,
      port: PORT,
      locality: BACKENDS[0]!.locality,
    }));
    const side = { ...service('side'), vip: '127.100.0.3', endpoints: sideEps };
    let from = agent.logs.length;
    assert.ok((await canopy.admin('PUT', '/api/v1/services/side', side)).status < 300);
    let line = await agent.waitForLog(applied, { from });
    assert.deepEqual(
      [line['decoded'], line['reused']],
      [1, 1],
      'side is new; web came as the same bytes and was not decoded',
    );
    from = agent.logs.length;
    const sideEp = `/api/v1/services/side/endpoints/${encodeURIComponent(`127.0.0.52:${PORT}`)}`;
    assert.equal((await canopy.admin('PATCH', sideEp, { health: 'unhealthy' })).status, 200);
    line = await agent.waitForLog(applied, { from });
    assert.deepEqual([line['decoded'], line['reused']], [1, 1], 'one health flip: one tree decoded');
    const state = (await agent.get('/debug/state')) as {
      services: { service: string; endpoints: number; slots: number }[];
    };
    const byName = Object.fromEntries(state.services.map((x) => [x.service, x]));
    // Every node has a bucket of its own: side's 8 endpoints sit in 4 buckets (root, region, zone,
    // subzone) of 8 slots; one leaving keeps the slots (its entry takes the last one). web lost b1
    // earlier: its subzone's node is gone with its slot (3 + 2 + 2 + 1 + 1 + 1 + 1 = 12 slots, then 11).
    assert.deepEqual(
      {
        web: [byName['web']?.endpoints, byName['web']?.slots],
        side: [byName['side']?.endpoints, byName['side']?.slots],
      },
      { web: [2, 11], side: [7, 32] },
    );
    from = agent.logs.length;
    assert.ok((await canopy.admin('DELETE', '/api/v1/services/side')).status < 300);
    line = await agent.waitForLog(applied, { from });
    assert.deepEqual([line['decoded'], line['reused']], [0, 1]);
  });

  it('a killed agent leaves the datapath serving; a new one resumes it', async () => {
    await agent.stop('SIGKILL');
    assert.deepEqual(await onlyIds(west), { b2: 20 }, 'no agent: the pinned maps keep serving');
    await west.loop(VIP, PORT);
    agent = await startAgentProcess(agentArgs);
    await agent.waitForLog((l) => l.msg === 'datapath resumed from pinned maps');
    await agent.waitForLog(applied);
    const from = agent.logs.length;
    await canopy.admin('PATCH', ep(BACKENDS[0]!), { health: 'healthy' });
    await agent.waitForLog(applied, { from });
    await new Promise((r) => setTimeout(r, 100));
    const samples = await west.stop();
    assert.deepEqual(
      samples.filter(([, id]) => id.startsWith('!')),
      [],
      'no connect failed across the restart',
    );
    assert.equal(samples.at(-1)?.[1], 'b1');
    assert.deepEqual(await onlyIds(west), { b1: 20 });
  });

  it('reports versions, map entries and kernel connects on /metrics', async () => {
    const text = await (await fetch(`${agent.metricsUrl}/metrics`)).text();
    const value = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1]);
    assert.ok(value('canopy_agent_tree_versions_applied_total') >= 2, text.slice(0, 400));
    assert.equal(value('canopy_agent_map_entries{map="services"}'), 1);
    // The resumed agent laid out b2 and b3 afresh (2 + 1 + 1 + 1 + 1 + 1 + 1 slots); b1 came back into
    // full buckets: the root, r1 and r1/z1 each took a second segment of 4 slots, and r1/z1/s1 a new
    // bucket of 1 (6 + 5 + 5 + 1 + 1 + 1 + 1 + 1).
    assert.equal(value('canopy_agent_map_entries{map="endpoints"}'), 21);
    assert.ok(value('canopy_agent_kernel_connects_total{outcome="rewritten"}') >= 60);
    assert.match(text, /canopy_agent_apply_seconds_bucket/);
  });
});
