/**
 * A dual-stack service in the kernel, end to end: `canopy serve` holds one
 * service with a VIP of each family (`vips`), `canopy agent` loads its two
 * trees, and a workload's connect() to the IPv4 VIP reaches a near IPv4
 * backend, to the IPv6 VIP a near IPv6 backend. The IPv6 backends listen on
 * fd00:d::/64 addresses the test adds to lo and removes afterwards.
 */
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { startAgentProcess, type AgentProcess, type LogLine } from './support/agent-process.js';
import { startCanopyProcess, type CanopyProcess } from './support/canopy-process.js';
import { Connector, counts, idBackend, kernelEnv, testCgroup } from './support/kernel.js';

const VIP4 = '127.100.0.77';
const VIP6 = 'fd00:d::100';
const PORT = 8113;
const BACKENDS = [
  { id: 'near4', address: '127.0.77.11', locality: { region: 'r1', zone: 'z1', subzone: 's1' } },
  { id: 'far4', address: '127.0.77.21', locality: { region: 'r2', zone: 'z1', subzone: 's1' } },
  { id: 'near6', address: 'fd00:d::11', locality: { region: 'r1', zone: 'z1', subzone: 's1' } },
  { id: 'far6', address: 'fd00:d::21', locality: { region: 'r2', zone: 'z1', subzone: 's1' } },
];
const ADDED = BACKENDS.filter((b) => b.address.includes(':')).map((b) => b.address);
const CLI = fileURLToPath(new URL('../server/src/cli/canopy.js', import.meta.url));

function reasonToSkip(): string | undefined {
  const k = kernelEnv().reason;
  if (k) return k;
  if (spawnSync('ip', ['-6', 'addr', 'show', 'dev', 'lo'], { stdio: 'ignore' }).status !== 0)
    return 'no `ip` command or no IPv6 on lo';
  return undefined;
}
const reason = reasonToSkip();
if (reason && process.env['CI'] === 'true' && !kernelEnv().reason) throw new Error(`CI=true: ${reason}`);

const service = {
  name: 'web',
  vips: [VIP4, VIP6],
  port: PORT,
  loadBalancing: { mode: 'failover', routingPreference: ['region', 'zone', 'subzone'] },
  endpoints: BACKENDS.map((b) => ({ address: b.address, port: PORT, locality: b.locality })),
};

const applied = (l: LogLine) => l.msg === 'tree version applied';

describe('a dual-stack service in the kernel (both VIPs, each to its family)', { skip: reason }, () => {
  let canopy: CanopyProcess;
  let agent: AgentProcess;
  let cg: ReturnType<typeof testCgroup>;
  let west: Connector;
  let east: Connector;
  const backends: Awaited<ReturnType<typeof idBackend>>[] = [];

  const ids = async (c: Connector, vip: string, n = 20) => {
    const r = await c.connect(vip, PORT, n);
    assert.deepEqual(r.errors, {}, `no failed connect to ${vip}`);
    return counts(r.ids);
  };

  before(async () => {
    for (const ip of ADDED) execFileSync('ip', ['-6', 'addr', 'replace', `${ip}/128`, 'dev', 'lo', 'nodad']);
    cg = testCgroup('dual');
    const westDir = cg.child('west');
    cg.child('east');
    for (const b of BACKENDS) backends.push(await idBackend(b.address, PORT, b.id));
    canopy = await startCanopyProcess({ server: { debounceMs: 20 }, services: [service] });
    agent = await startAgentProcess([
      ...['--server', canopy.xdsUri, '--node-id', 'node-dual'],
      ...['--region', 'r1', '--zone', 'z1', '--subzone', 's1'],
      ...['--cgroup', cg.dir, '--pin-dir', cg.pinDir, '--grace-ms', '100'],
      ...['--workload', 'east=region=r2,zone=z1,subzone=s1'],
    ]);
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
    const { Datapath } = await import('../server/src/agent/datapath.js');
    if (cg) {
      try {
        Datapath.open({ pinDir: cg.pinDir, cgroup: cg.dir }).close({ detach: true, cgroup: cg.dir });
      } catch {
        // nothing pinned
      }
      cg.cleanup();
    }
    for (const ip of ADDED) spawnSync('ip', ['-6', 'addr', 'del', `${ip}/128`, 'dev', 'lo'], { stdio: 'ignore' });
  });

  it('the server holds both VIPs: the admin API and `canopy get services` show them', async () => {
    const held = (await (await fetch(`${canopy.adminUrl}/api/v1/services/web`)).json()) as Record<string, unknown>;
    assert.equal(held['vip'], VIP4);
    assert.deepEqual(held['vips'], [VIP4, VIP6]);
    const get = spawnSync(process.execPath, [CLI, 'get', 'services', '--admin', new URL(canopy.adminUrl).host], {
      encoding: 'utf8',
    });
    assert.equal(get.status, 0, get.stderr);
    assert.match(get.stdout, new RegExp(`web .* ${VIP4},${VIP6}`));
  });

  it('a connect to the IPv4 VIP reaches a near IPv4 backend, to the IPv6 VIP a near IPv6 one', async () => {
    assert.deepEqual(await ids(west, VIP4), { near4: 20 }, 'west is the node locality r1/z1/s1');
    assert.deepEqual(await ids(west, VIP6), { near6: 20 });
    assert.deepEqual(await ids(east, VIP4), { far4: 20 }, 'east is r2/z1/s1 by its --workload entry');
    assert.deepEqual(await ids(east, VIP6), { far6: 20 });
  });

  it('a health change reaches both trees; back to single-stack unloads the other VIP', async () => {
    const put = async (body: unknown) => {
      const r = await fetch(`${canopy.adminUrl}/api/v1/services/web`, {
        method: 'PUT',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      assert.ok(r.ok, `${r.status} ${await r.text()}`);
    };
    const without = (id: string) => ({
      ...service,
      endpoints: service.endpoints.filter((_, i) => BACKENDS[i]!.id !== id),
    });
    const settle = async (check: () => Promise<boolean>) => {
      for (let i = 0; i < 100 && !(await check()); i++) await new Promise((r) => setTimeout(r, 50));
    };
    await put(without('near6'));
    await settle(async () => (await west.connect(VIP6, PORT, 1)).ids[0] === 'far6');
    assert.deepEqual(await ids(west, VIP6), { far6: 20 }, 'no near IPv6 backend: the next tier of the family');
    assert.deepEqual(await ids(west, VIP4), { near4: 20 }, 'the IPv4 tree is untouched');
    await put({ ...service, vips: [VIP4] });
    await settle(async () => (await west.connect(VIP6, PORT, 1)).ids.length === 0);
    const gone = await west.connect(VIP6, PORT, 3);
    assert.deepEqual(gone.ids, [], 'the IPv6 VIP is no longer intercepted (nothing listens there)');
    assert.deepEqual(await ids(west, VIP4), { near4: 20 });
  });
});
