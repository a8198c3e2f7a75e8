/**
 * The config file watched by a real `canopy serve` on a real directory (issue
 * 33): a neighbour written every 0.5 s no longer holds an edit back (the
 * directory-wide watch restarted its settle delay on every write, 35–45 s
 * measured); a file rewritten without pause is still applied within the
 * bound (5 s); a rename over the file and a Kubernetes ConfigMap's symlink
 * swap are applied; every step is in the log (seen, applied or refused).
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { dump as stringify } from 'js-yaml';
import { startCanopyProcess, type CanopyProcess } from './support/canopy-process.js';

const mesh = (port: number) => stringify({ services: [{ name: 'echo', endpoints: [{ address: '127.0.0.9', port }] }] });

const dirs: string[] = [];
const servers: CanopyProcess[] = [];
after(async () => {
  for (const s of servers) await s.stop();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function tmpDir(): string {
  const d = mkdtempSync(path.join(os.tmpdir(), 'canopy-watch-'));
  dirs.push(d);
  return d;
}

async function servedPort(s: CanopyProcess): Promise<number | undefined> {
  const r = await s.admin('GET', '/api/v1/services/echo');
  return (r.body as { endpoints?: { port: number }[] }).endpoints?.[0]?.port;
}

/** Milliseconds until the server serves `port`, polled every 50 ms, or fails after `timeoutMs`. */
async function msUntilServed(s: CanopyProcess, port: number, timeoutMs: number): Promise<number> {
  const start = Date.now();
  while ((await servedPort(s)) !== port) {
    if (Date.now() - start > timeoutMs) throw new Error(`port ${port} not served after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
  return Date.now() - start;
}

function logLines(s: CanopyProcess, msg: string): Record<string, unknown>[] {
  return s
    .logs()
    .filter((l) => l.includes(`"msg":"${msg}`))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

/** A log line the server writes after the store has served the write: it may still be in the pipe. */
async function waitForLog(s: CanopyProcess, msg: string, ms = 5_000): Promise<void> {
  const end = Date.now() + ms;
  while (logLines(s, msg).length === 0 && Date.now() < end) await new Promise((r) => setTimeout(r, 50));
}

describe('canopy serve watching its config file', () => {
  it('a neighbour written every 0.5 s does not delay an edit; a rename over it applies; both are logged', async (t) => {
    const dir = tmpDir();
    const file = path.join(dir, 'mesh.yaml');
    writeFileSync(file, mesh(1000));
    const s = await startCanopyProcess({}, [], { configFile: file });
    servers.push(s);
    let n = 0;
    const neighbour = setInterval(() => writeFileSync(path.join(dir, 'app.log'), `line ${n++}\n`, { flag: 'a' }), 500);
    try {
      await new Promise((r) => setTimeout(r, 1200)); // the neighbour is already busy when the edit comes
      writeFileSync(`${file}.tmp`, mesh(1001));
      renameSync(`${file}.tmp`, file);
      const ms = await msUntilServed(s, 1001, 15_000);
      t.diagnostic(`edit served ${ms} ms after the rename, the neighbour written every 0.5 s (loaded machine)`);
      // One settle time (1 s) and a read: the bound is 5 s; before, the edit waited as long as the neighbour kept on.
      assert.ok(ms < 4500, `served after ${ms} ms`);
    } finally {
      clearInterval(neighbour);
    }
    await waitForLog(s, 'config reloaded');
    const seen = logLines(s, 'config file change seen');
    assert.ok(seen.length >= 1, 'the edit is logged when seen');
    assert.equal(seen.at(-1)?.['file'], file);
    const reloaded = logLines(s, 'config reloaded').at(-1);
    assert.ok(reloaded && typeof reloaded['waitedMs'] === 'number', 'the reload says how long the edit waited');
    // The neighbour's writes are not edits of the file: nothing else was seen.
    assert.equal(seen.length, 1, JSON.stringify(seen));
  });

  it('a file rewritten every 0.3 s is applied within the 5 s bound; an invalid edit is refused, saying why', async (t) => {
    const dir = tmpDir();
    const file = path.join(dir, 'mesh.yaml');
    writeFileSync(file, mesh(2000));
    const s = await startCanopyProcess({}, [], { configFile: file });
    servers.push(s);
    let port = 2001;
    const started = Date.now();
    const rewriter = setInterval(() => writeFileSync(file, mesh(port++)), 300);
    let served: number | undefined;
    try {
      const end = Date.now() + 12_000;
      while (Date.now() < end && ((served = await servedPort(s)) ?? 2000) === 2000)
        await new Promise((r) => setTimeout(r, 50));
    } finally {
      clearInterval(rewriter);
    }
    const ms = Date.now() - started;
    t.diagnostic(`a never-quiet file applied (port ${served}) ${ms} ms after its first rewrite (loaded machine)`);
    assert.notEqual(served, 2000, 'an edit of a file that never goes quiet is applied');
    assert.ok(ms < 8000, `applied after ${ms} ms`);

    writeFileSync(file, 'services:\n  - name: echo\n    endpoints: [{ address: 127.0.0.9, port: 99999 }]\n');
    const end = Date.now() + 10_000;
    while (logLines(s, 'config edit rejected').length === 0 && Date.now() < end)
      await new Promise((r) => setTimeout(r, 50));
    const rejected = logLines(s, 'config edit rejected');
    assert.equal(rejected.length, 1, 'the refusal is logged');
    assert.match(String(rejected[0]?.['msg']), /services\[0\]\.endpoints\[0\]\.port/);
    assert.notEqual(await servedPort(s), 99999);
  });

  it('a Kubernetes ConfigMap update (the ..data symlink swapped to a new directory) is applied', async () => {
    const dir = tmpDir();
    const version = (n: number) => {
      mkdirSync(path.join(dir, `..2026_11_28_${n}`));
      writeFileSync(path.join(dir, `..2026_11_28_${n}`, 'mesh.yaml'), mesh(3000 + n));
    };
    version(0);
    symlinkSync('..2026_11_28_0', path.join(dir, '..data'));
    symlinkSync('..data/mesh.yaml', path.join(dir, 'mesh.yaml'));
    const s = await startCanopyProcess({}, [], { configFile: path.join(dir, 'mesh.yaml') });
    servers.push(s);
    assert.equal(await servedPort(s), 3000);
    // What the kubelet does: a new timestamped directory, a new link renamed over ..data, the old one removed.
    version(1);
    symlinkSync('..2026_11_28_1', path.join(dir, '..data_tmp'));
    renameSync(path.join(dir, '..data_tmp'), path.join(dir, '..data'));
    rmSync(path.join(dir, '..2026_11_28_0'), { recursive: true });
    await msUntilServed(s, 3001, 10_000);
    await waitForLog(s, 'config reloaded');
    assert.ok(logLines(s, 'config reloaded').length >= 1, 'the reload is logged');
  });
});
