/**
 * Operating the datapath: an agent started with another build of the BPF
 * object swaps the pinned program in one step while connects keep flowing;
 * `canopy agent uninstall` detaches the program and removes the pins.
 */
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { loadAddon } from '../server/src/agent/bpf.js';
import { Datapath } from '../server/src/agent/datapath.js';
import { Mesh } from '../server/src/domain/mesh.js';
import { contentHash } from '../server/src/resources/resource.js';
import { decodeLocalityTree, encodeLocalityTree } from '../server/src/resources/tree-codec.js';
import { Connector, counts, idBackend, kernelEnv, testCgroup } from './support/kernel.js';
import { placementOf, spec } from './support/kernel-fixtures.js';

const env = kernelEnv();
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const VIP = '127.100.3.1';
const PORT = 8097;

/** The same source built for another BPF CPU version: other instructions, same maps. */
function otherBuild(dir: string): string {
  const out = path.join(dir, 'canopy-v3.bpf.o');
  const triple = spawnSync('gcc', ['-dumpmachine'], { encoding: 'utf8' }).stdout.trim();
  const inc = ['-I', path.join(root, 'bpf'), ...(triple ? ['-I', `/usr/include/${triple}`] : [])];
  execFileSync('clang', [
    '-O2',
    '-g',
    '-target',
    'bpf',
    '-mcpu=v3',
    ...inc,
    '-c',
    path.join(root, 'bpf', 'canopy.bpf.c'),
    '-o',
    out,
  ]);
  return out;
}

describe('kernel datapath operations', { skip: env.reason }, () => {
  let cg: ReturnType<typeof testCgroup>;
  let tmp: string;
  let conn: Connector;
  let dp: Datapath | undefined;
  const backends: Awaited<ReturnType<typeof idBackend>>[] = [];

  before(async () => {
    cg = testCgroup('ops');
    tmp = mkdtempSync(path.join(os.tmpdir(), 'canopy-ops-'));
    backends.push(await idBackend('127.0.3.1', PORT, 'o1'));
    const dir = cg.child('w');
    conn = await Connector.start(dir);
  });

  after(async () => {
    conn?.close();
    dp?.close({ detach: true, cgroup: cg.dir });
    for (const b of backends) await b.close();
    cg?.cleanup();
    rmSync(tmp, { recursive: true, force: true });
  });

  it('a newer object replaces the pinned program atomically; the maps and connects carry on', async () => {
    dp = Datapath.open({ pinDir: cg.pinDir, cgroup: cg.dir, graceMs: 20 });
    dp.setWorkloads(placementOf('r1/z1/s1'), []);
    const mesh = new Mesh();
    mesh.put(spec('ops', VIP, PORT, 'failover', [['o1', '127.0.3.1', 'r1/z1/s1']]));
    const st = mesh.get('ops')!;
    const bytes = encodeLocalityTree(st.spec, st.tree.compile());
    dp.apply([{ tree: decodeLocalityTree(bytes), hash: contentHash(bytes) }]);
    const bpf = loadAddon();
    const before = bpf.progId(dp.progFd);
    assert.deepEqual(bpf.queryConnect4(cg.dir), [before]);

    // Built before the connect loop: clang blocks this process (and so the backend it serves) for
    // seconds on a loaded machine, and a connect waiting that long timed out (the test's flake).
    const other = otherBuild(tmp);
    await conn.loop(VIP, PORT);
    const same = Datapath.open({ pinDir: cg.pinDir, cgroup: cg.dir });
    assert.equal(same.replaced, false, 'the same build keeps the pinned program');
    assert.equal(bpf.progId(same.progFd), before);
    same.close();

    const next = Datapath.open({ pinDir: cg.pinDir, cgroup: cg.dir, objectPath: other });
    assert.equal(next.replaced, true);
    const after = bpf.progId(next.progFd);
    assert.notEqual(after, before);
    assert.deepEqual(bpf.queryConnect4(cg.dir), [after], "one program attached: the new one, in the old one's place");
    assert.equal(next.services().length, 1, 'the maps (and the trees in them) are the pinned ones');
    await new Promise((r) => setTimeout(r, 100));
    const samples = await conn.stop();
    assert.ok(samples.length > 5, `${samples.length} connects during the swap`);
    assert.deepEqual(
      counts(samples.map(([, id]) => id)),
      { o1: samples.length },
      'no connect failed or went elsewhere',
    );
    dp.close();
    dp = next;
  });

  it('canopy agent uninstall detaches the program and removes the pins', async () => {
    dp?.close();
    dp = undefined;
    const cli = path.join(root, 'dist', 'server', 'src', 'cli', 'canopy.js');
    const r = spawnSync(process.execPath, [cli, 'agent', 'uninstall', '--cgroup', cg.dir, '--pin-dir', cg.pinDir], {
      encoding: 'utf8',
      timeout: 20_000,
    });
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /detached connect4/);
    assert.deepEqual(loadAddon().queryConnect4(cg.dir), []);
    assert.equal(existsSync(cg.pinDir), false);
    const c = await conn.connect(VIP, PORT, 3);
    assert.deepEqual(c.errors, { ECONNREFUSED: 3 }, 'the VIP is no longer rewritten');
  });
});
