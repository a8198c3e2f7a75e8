/**
 * Replicas on one etcd apply one config file (issue 33): two real `canopy
 * serve` processes on a real etcd. One with another file than the live
 * replica's refuses to start, naming both files; the same content under
 * another path starts; `--take-over` makes its file the one applied, after
 * which the first replica refuses an edit of its old file and, restarted,
 * refuses to start, naming the replica that took over. Before, each start
 * overwrote the other's services.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { dump as stringify } from 'js-yaml';
import { startCanopyProcess, type CanopyProcess } from './support/canopy-process.js';
import { etcdSkip, startEtcd, type EtcdProcess } from './support/etcd-process.js';

const mesh = (address: string) => ({ services: [{ name: 'shared', endpoints: [{ address, port: 80 }] }] });

async function served(s: CanopyProcess): Promise<string | undefined> {
  const r = await s.admin('GET', '/api/v1/services/shared');
  return (r.body as { endpoints?: { address: string }[] }).endpoints?.[0]?.address;
}

async function refusal(start: Promise<CanopyProcess>): Promise<string> {
  const r = await start.then(
    async (s) => {
      await s.kill();
      return undefined;
    },
    (err: unknown) => String(err),
  );
  assert.ok(r !== undefined, 'the replica started');
  return r;
}

describe('replicas on one etcd apply one file', { skip: etcdSkip() }, () => {
  let etcd: EtcdProcess;
  let store: string[];
  const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-replica-files-'));
  const fileA = path.join(dir, 'a.yaml');
  const fileB = path.join(dir, 'b.yaml');
  const running: CanopyProcess[] = [];
  before(async () => {
    etcd = await startEtcd();
    store = ['--store', `etcd://${etcd.endpoint}/canopy-files/`];
    writeFileSync(fileA, stringify(mesh('10.10.0.1')));
    writeFileSync(fileB, stringify(mesh('10.10.0.2')));
  });
  after(async () => {
    for (const r of running) await r.kill();
    await etcd?.destroy();
    rmSync(dir, { recursive: true, force: true });
  });

  it('another file is refused, naming both; the same content starts; --take-over applies it', async () => {
    const a = await startCanopyProcess({}, store, { configFile: fileA });
    running.push(a);
    const refused = await refusal(startCanopyProcess({}, store, { configFile: fileB }));
    assert.match(refused, /exited with 1/);
    assert.match(refused, new RegExp(`config file ${fileB} on .* differs from the one the live replicas`));
    assert.match(refused, new RegExp(`${fileA} on [^ ]+ \\(pid ${a.pid}, sha256 `), 'names the other replica');
    assert.match(refused, /--take-over/);
    assert.equal(await served(a), '10.10.0.1', 'the refused replica wrote nothing');

    // The same bytes under another path are the same file.
    const copy = path.join(dir, 'copy.yaml');
    writeFileSync(copy, stringify(mesh('10.10.0.1')));
    const same = await startCanopyProcess({}, store, { configFile: copy });
    await same.stop();

    const b = await startCanopyProcess({}, [...store, '--take-over'], { configFile: fileB });
    running.push(b);
    assert.equal(await served(b), '10.10.0.2');
    const end = Date.now() + 5000;
    while ((await served(a)) !== '10.10.0.2' && Date.now() < end) await new Promise((r) => setTimeout(r, 50));
    assert.equal(await served(a), '10.10.0.2', 'the first replica serves the file taken over');

    // An edit of the first replica's old file is refused, naming the file taken over.
    writeFileSync(fileA, stringify(mesh('10.10.0.3')));
    const logged = Date.now() + 10_000;
    const refusedEdit = () => a.logs().find((l) => l.includes('config edit refused'));
    while (!refusedEdit() && Date.now() < logged) await new Promise((r) => setTimeout(r, 50));
    assert.match(refusedEdit() ?? '', new RegExp(`apply another file, ${fileB} on [^ ]+ \\(pid ${b.pid}`));
    assert.equal(await served(b), '10.10.0.2');

    // Restarted, the first replica refuses to start, naming the one that took over.
    await a.stop();
    const again = await refusal(startCanopyProcess({}, store, { configFile: fileA }));
    assert.match(again, new RegExp(`${fileB} on [^ ]+ \\(pid ${b.pid}, sha256 `));
    assert.equal(await served(b), '10.10.0.2');
  });
});
