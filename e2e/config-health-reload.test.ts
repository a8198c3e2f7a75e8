/**
 * A file edit keeps the health an operator set through the API (docs/configuration.md, "Reloading the
 * file"): `canopy serve --config FILE`, `canopy health web --locality us-east unhealthy`, then an edit of
 * `web`'s entry in the file (timeoutMs added) written to disk. The edit applies, the marks stay, and the
 * server says so at warn level naming the endpoints; an endpoint whose health the file itself changes
 * takes the file's new value.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { dump } from 'js-yaml';
import { startCanopyProcess, type CanopyProcess } from './support/canopy-process.js';
import { runCanopyCli } from './support/canopy-cli.js';

const endpoints = [
  { address: '10.0.0.1', port: 80, locality: { region: 'us-east', zone: 'a' } },
  { address: '10.0.0.2', port: 80, locality: { region: 'us-east', zone: 'b' } },
  { address: '10.0.0.3', port: 80, locality: { region: 'eu-west', zone: 'a' } },
  { address: '10.0.0.4', port: 80, locality: { region: 'eu-west', zone: 'b' } },
];
const mesh = (web: Record<string, unknown> = {}, eps: object[] = endpoints) => ({
  server: { debounceMs: 20 },
  services: [{ name: 'web', port: 80, endpoints: eps, ...web }],
});

describe('a file edit keeps health marks made through the API', () => {
  let canopy: CanopyProcess;

  before(async () => {
    canopy = await startCanopyProcess(mesh());
  });
  after(async () => {
    await canopy?.stop();
  });

  const cli = (...args: string[]) => runCanopyCli([...args, '--admin', canopy.adminUrl]);
  const health = async () => {
    const r = await cli('get', 'endpoints', '--service', 'web', '-o', 'json');
    assert.equal(r.code, 0, r.stderr);
    const rows = (JSON.parse(r.stdout) as { endpoints: { address: string; health: string }[] }).endpoints;
    return Object.fromEntries(rows.map((e) => [e.address, e.health]));
  };
  const until = async (what: string, check: () => Promise<boolean>) => {
    const deadline = Date.now() + 15_000;
    while (!(await check())) {
      if (Date.now() > deadline) throw new Error(`${what} not within 15 s:\n${canopy.logs().slice(-20).join('\n')}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  const timeoutOf = async () => {
    const r = await canopy.admin('GET', '/api/v1/services/web');
    return (r.body as { timeoutMs?: number }).timeoutMs;
  };

  it('canopy health, then an edit of the service in the file: the marks stay, said at warn level', async () => {
    const marked = await cli('health', 'web', '--locality', 'us-east', 'unhealthy');
    assert.equal(marked.code, 0, marked.stderr);
    assert.deepEqual(await health(), {
      '10.0.0.1': 'unhealthy',
      '10.0.0.2': 'unhealthy',
      '10.0.0.3': 'healthy',
      '10.0.0.4': 'healthy',
    });
    writeFileSync(canopy.configPath, dump(mesh({ timeoutMs: 5000 })));
    await until('the edit applied', async () => (await timeoutOf()) === 5000);
    assert.deepEqual(await health(), {
      '10.0.0.1': 'unhealthy',
      '10.0.0.2': 'unhealthy',
      '10.0.0.3': 'healthy',
      '10.0.0.4': 'healthy',
    });
    const warn = canopy.logs().find((l) => l.includes('kept the health set through the API'));
    assert.ok(warn, 'the reload says it kept the marks');
    const line = JSON.parse(warn) as { level: number; msg: string };
    assert.equal(line.level, 40, 'at warn level');
    assert.match(line.msg, /web\/10\.0\.0\.1:80 unhealthy \(file: healthy\)/);
    assert.match(line.msg, /web\/10\.0\.0\.2:80 unhealthy \(file: healthy\)/);
  });

  it("an endpoint whose health the file changes takes the file's value; the API's other marks stay", async () => {
    const eps = endpoints.map((e) => (e.address === '10.0.0.3' ? { ...e, health: 'draining' } : e));
    writeFileSync(canopy.configPath, dump(mesh({ timeoutMs: 6000 }, eps)));
    await until('the second edit applied', async () => (await timeoutOf()) === 6000);
    assert.deepEqual(await health(), {
      '10.0.0.1': 'unhealthy',
      '10.0.0.2': 'unhealthy',
      '10.0.0.3': 'draining',
      '10.0.0.4': 'healthy',
    });
    // Cleared through the API, the mark is gone for good: the next edit writes the file's health.
    assert.equal((await cli('health', 'web', '--locality', 'us-east', 'healthy')).code, 0);
    writeFileSync(canopy.configPath, dump(mesh({ timeoutMs: 7000 }, eps)));
    await until('the third edit applied', async () => (await timeoutOf()) === 7000);
    assert.equal((await health())['10.0.0.1'], 'healthy');
  });
});
