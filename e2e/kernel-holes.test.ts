/**
 * Holes of the node agent, each driven as a user meets it: `canopy serve` and
 * `canopy agent` as real processes, real connects from a cgroup.
 * - a version NACKed only because retiring trees still hold map room is
 *   loaded (and ACKed) once they are freed, without waiting for another change;
 * - `--cgroup` naming a directory that is not a cgroup says so and leaves no pins;
 * - `canopy agent uninstall` under a running agent: the agent notices, says so, exits.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { runAgentCommand, startAgentProcess, type AgentProcess, type LogLine } from './support/agent-process.js';
import { startCanopyProcess, type CanopyProcess } from './support/canopy-process.js';
import { Connector, counts, idBackend, kernelEnv, testCgroup } from './support/kernel.js';

const env = kernelEnv();
const VIP = '127.100.11.1';
const PORT = 8111;
const BACKENDS = [
  { id: 'c1', address: '127.0.11.1', locality: { region: 'r1', zone: 'z1', subzone: 's1' } },
  { id: 'c2', address: '127.0.11.2', locality: { region: 'r1', zone: 'z1', subzone: 's2' } },
  { id: 'c3', address: '127.0.11.3', locality: { region: 'r1', zone: 'z2', subzone: 's1' } },
  { id: 'c4', address: '127.0.11.4', locality: { region: 'r2', zone: 'z1', subzone: 's1' } },
];
const applied = (l: LogLine) => l.msg === 'tree version applied';

describe('node agent holes', { skip: env.reason }, () => {
  let canopy: CanopyProcess;
  let cg: ReturnType<typeof testCgroup>;
  let conn: Connector;
  let agent: AgentProcess | undefined;
  const backends: Awaited<ReturnType<typeof idBackend>>[] = [];
  const c1 = `/api/v1/services/cap/endpoints/${encodeURIComponent(`${BACKENDS[0]!.address}:${PORT}`)}`;

  before(async () => {
    cg = testCgroup('holes');
    for (const b of BACKENDS) backends.push(await idBackend(b.address, PORT, b.id));
    canopy = await startCanopyProcess({
      server: { debounceMs: 20 },
      services: [
        {
          name: 'cap',
          vip: VIP,
          port: PORT,
          loadBalancing: { mode: 'failover', routingPreference: ['region', 'zone', 'subzone'] },
          endpoints: BACKENDS.map((b) => ({ address: b.address, port: PORT, locality: b.locality })),
        },
      ],
    });
    conn = await Connector.start(cg.child('w'));
  });

  after(async () => {
    conn?.close();
    await agent?.stop();
    await canopy?.stop();
    for (const b of backends) await b.close();
    await runAgentCommand(['uninstall', '--cgroup', cg.dir, '--pin-dir', cg.pinDir]);
    cg?.cleanup();
  });

  const args = () => [
    '--server',
    canopy.xdsUri,
    '--node-id',
    'holes',
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
  ];

  it('a version NACKed for room that retiring trees hold is retried once they are freed, and ACKed', async () => {
    // 16 endpoint slots, all in use: every node has a bucket of its own (the root's 4 slots, r1's 3,
    // r1/z1's 2, and 1 for each other node). Retired slots are held for 1.5 s.
    agent = await startAgentProcess([...args(), '--max-endpoints', '16', '--grace-ms', '1500']);
    await agent.waitForLog(applied);
    let from = agent.logs.length;
    assert.equal((await canopy.admin('PATCH', c1, { health: 'unhealthy' })).status, 200);
    await agent.waitForLog(applied, { from }); // r1/z1/s1 is gone: its node deleted, its slot retiring
    assert.deepEqual(counts((await conn.connect(VIP, PORT, 10)).ids), { c2: 10 }, 'r1/z1 next');
    from = agent.logs.length;
    assert.equal((await canopy.admin('PATCH', c1, { health: 'healthy' })).status, 200);
    // r1/z1/s1 comes back and needs a slot: 15 live + 1 retiring = 16.
    const nack = await agent.waitForLog((l) => l.msg.startsWith('tree version rejected'), { from });
    assert.match(String(nack['detail']), /endpoint map full/);
    assert.match(nack.msg, /retried once they are freed/);
    const late = await agent.waitForLog((l) => applied(l) && l['retry'] === 1, { from, timeoutMs: 10_000 });
    assert.equal(late['version'], nack['version'], 'the NACKed version itself was loaded');
    const r = await conn.connect(VIP, PORT, 10);
    assert.deepEqual(
      { ...counts(r.ids), ...r.errors },
      { c1: 10 },
      'c1 serves its subzone again, with no other change made',
    );
    const { clients } = (await canopy.admin('GET', '/debug/clients')).body as {
      clients: { nodeId: string; types: { typeUrl: string; versionSent: string; versionAcked: string }[] }[];
    };
    const tree = clients.find((c) => c.nodeId === 'holes')?.types.find((t) => t.typeUrl.endsWith('LocalityTree'));
    assert.equal(tree?.versionAcked, nack['version'], 'the server got the late ACK');
  });

  it('canopy agent uninstall under a running agent: the agent notices, says so and exits', async () => {
    assert.ok(agent, 'the agent of the previous test runs');
    const u = await runAgentCommand(['uninstall', '--cgroup', cg.dir, '--pin-dir', cg.pinDir]);
    assert.equal(u.status, 0, u.stderr);
    assert.match(u.stdout, /detached connect4/);
    const line = await agent.waitForLog((l) => l.msg.startsWith('the datapath was uninstalled under this agent'), {
      timeoutMs: 10_000,
    });
    assert.match(String(line['reason']), /detached|removed/);
    assert.match(line.msg, /the agent exits/);
    assert.equal(await agent.exited, 1);
    agent = undefined;
    // Nothing steers the VIP any more: connects to it are refused (nothing listens on it).
    assert.deepEqual((await conn.connect(VIP, PORT, 3)).errors, { ECONNREFUSED: 3 });
  });

  it('--cgroup naming a directory that is not a cgroup: a clear error, no pins left', async () => {
    const plain = mkdtempSync(path.join(os.tmpdir(), 'canopy-not-a-cgroup-'));
    const pinDir = `${cg.pinDir}-plain`;
    try {
      const r = await runAgentCommand([
        '--server',
        canopy.xdsUri,
        '--node-id',
        'x',
        '--cgroup',
        plain,
        '--pin-dir',
        pinDir,
        '--metrics-port',
        '0',
      ]);
      assert.equal(r.status, 1);
      assert.match(r.stderr, /--cgroup .* is not a cgroup v2 directory/);
      assert.doesNotMatch(r.stderr, /EBADF/);
      assert.ok(!existsSync(pinDir) || readdirSync(pinDir).length === 0, 'no pins left behind');
    } finally {
      rmSync(plain, { recursive: true, force: true });
      rmSync(pinDir, { recursive: true, force: true });
    }
  });
});
