/**
 * `canopy serve` as a process: separate xDS and admin hosts, the refusal to
 * expose the admin API without a token, a token read from a file, and the
 * heap growth (flag, env, default, refusals).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, describe, it } from 'node:test';
import { startCanopyProcess, type CanopyProcess } from './support/canopy-process.js';

const CLI = fileURLToPath(new URL('../server/src/cli/canopy.js', import.meta.url));
const config = { services: [{ name: 'echo', endpoints: [{ address: '10.0.0.1', port: 80 }] }] };

describe('canopy serve flags', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-flags-'));
  const started: CanopyProcess[] = [];
  after(async () => {
    for (const p of started) await p.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('--xds-host and --admin-host put each port on its own address', async () => {
    const p = await startCanopyProcess(config, ['--xds-host', '127.0.0.1', '--admin-host', '127.0.0.2']);
    started.push(p);
    assert.match(p.xdsUri, /^127\.0\.0\.1:\d+$/);
    assert.match(p.adminUrl, /^http:\/\/127\.0\.0\.2:\d+$/);
    assert.equal((await p.admin('GET', '/healthz')).status, 200);
  });

  it('refuses to start with a non-loopback admin host and no token, saying what to do', () => {
    const file = path.join(dir, 'mesh.yaml');
    writeFileSync(file, JSON.stringify(config));
    const r = spawnSync(
      process.execPath,
      [
        CLI,
        'serve',
        '--config',
        file,
        '--data-dir',
        path.join(dir, 'data'),
        '--admin-host',
        '0.0.0.0',
        '--xds-port',
        '0',
      ],
      { encoding: 'utf8', timeout: 20_000 },
    );
    assert.equal(r.status, 1, r.stderr);
    assert.match(r.stderr, /refusing to serve the admin API on 0\.0\.0\.0 without a token/);
    assert.match(r.stderr, /--admin-token-file/);
    assert.match(r.stderr, /--insecure-admin/);
  });

  it('reads the token from --admin-token-file: writes need it, and a short token is refused', async () => {
    const short = path.join(dir, 'short.token');
    writeFileSync(short, 'abc\n');
    const r = spawnSync(
      process.execPath,
      [CLI, 'serve', '--config', path.join(dir, 'mesh.yaml'), '--admin-token-file', short],
      {
        encoding: 'utf8',
        timeout: 20_000,
      },
    );
    assert.equal(r.status, 2);
    assert.match(r.stderr, /at least 16 characters/);

    const tokenFile = path.join(dir, 'admin.token');
    writeFileSync(tokenFile, 'a-token-of-enough-length\n');
    const p = await startCanopyProcess(config, ['--admin-token-file', tokenFile]);
    started.push(p);
    assert.equal((await p.admin('PUT', '/api/v1/services/x', { endpoints: [] })).status, 401);
    const res = await fetch(`${p.adminUrl}/api/v1/services/x`, {
      method: 'PUT',
      body: JSON.stringify({ endpoints: [] }),
      headers: { 'content-type': 'application/json', authorization: 'Bearer a-token-of-enough-length' },
    });
    assert.equal(res.status, 201);
  });

  it('--heap-growth (CANOPY_HEAP_GROWTH) sets the heap growth, 100% by default; a bad value is refused with its flag or variable', async () => {
    const file = path.join(dir, 'mesh.yaml');
    writeFileSync(file, JSON.stringify(config));
    const growthOf = (p: CanopyProcess): unknown =>
      p
        .logs()
        .map((l) => {
          try {
            return JSON.parse(l) as Record<string, unknown>;
          } catch {
            return {};
          }
        })
        .find((m) => m['msg'] === 'js heap growth')?.['heapGrowthPercent'];
    const byDefault = await startCanopyProcess(config);
    started.push(byDefault);
    assert.equal(growthOf(byDefault), 100);
    const set = await startCanopyProcess(config, ['--heap-growth', '0']);
    started.push(set);
    assert.equal(growthOf(set), 0);

    const refused = (args: string[], env: Record<string, string> = {}) =>
      spawnSync(process.execPath, [CLI, 'serve', '--config', file, '--data-dir', path.join(dir, 'd2'), ...args], {
        encoding: 'utf8',
        timeout: 20_000,
        env: { ...process.env, ...env },
      });
    const big = refused(['--heap-growth', '5000']);
    assert.equal(big.status, 2, big.stderr);
    assert.match(big.stderr, /'--heap-growth <percent>' argument '5000' is invalid\. must be an integer in 0\.\.1000/);
    const junk = refused([], { CANOPY_HEAP_GROWTH: 'lots' });
    assert.equal(junk.status, 2, junk.stderr);
    assert.match(junk.stderr, /value 'lots' from env 'CANOPY_HEAP_GROWTH' is invalid/);
  });
});
