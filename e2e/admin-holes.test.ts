/**
 * The admin API's smaller holes (issue 19, section 6), against a real
 * `canopy serve` over HTTP: unusable endpoint addresses refused with their
 * field paths, PATCH held to PUT's uint32 weight sum, the DNS-rebinding Host
 * check on reads, and the admin token file rotated without a restart.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startCanopyProcess, type CanopyProcess } from './support/canopy-process.js';

type ErrorBody = { error: { code: string; fields?: { path: string; message: string }[] } };
const MAX_WEIGHT = 1_000_000;

describe('admin API input holes', () => {
  let server: CanopyProcess;
  before(async () => {
    server = await startCanopyProcess({ services: [] });
  });
  after(async () => {
    await server?.stop();
  });

  it('refuses ::ffff:0.0.0.0 and other unspecified or IPv4-mapped forms, naming each field', async () => {
    const bad = ['::ffff:0.0.0.0', '::ffff:0:0', '::', '::ffff:10.0.0.1', '0.0.0.0'];
    const put = await server.admin('PUT', '/api/v1/services/addr', {
      endpoints: bad.map((address) => ({ address, port: 80 })),
    });
    assert.equal(put.status, 400);
    const fields = (put.body as ErrorBody).error.fields ?? [];
    assert.deepEqual(
      fields.map((f) => f.path),
      bad.map((_, i) => `endpoints[${i}].address`),
    );
    assert.match(fields[3]!.message, /give 10\.0\.0\.1 itself/);

    assert.equal(
      (await server.admin('PUT', '/api/v1/services/addr', { endpoints: [{ address: '10.0.0.1', port: 80 }] })).status,
      201,
    );
    const bulk = await server.admin('PATCH', '/api/v1/services/addr/endpoints', {
      upsert: [{ address: '::ffff:0.0.0.0', port: 81 }],
    });
    assert.equal(bulk.status, 400);
    assert.deepEqual(
      (bulk.body as ErrorBody).error.fields?.map((f) => f.path),
      ['upsert[0].address'],
    );
  });

  it('a PATCH cannot push the endpoint weight sum past uint32, as a PUT cannot', async () => {
    // 4,294 endpoints at the largest weight and one at 1: 4,294,000,001, just under 2^32 - 1.
    const endpoints = Array.from({ length: 4295 }, (_, i) => ({
      address: `10.${20 + Math.floor(i / 62500)}.${Math.floor(i / 250) % 250}.${(i % 250) + 1}`,
      port: 80,
      weight: i === 0 ? 1 : MAX_WEIGHT,
    }));
    assert.equal((await server.admin('PUT', '/api/v1/services/heavy', { endpoints })).status, 201);
    const first = `${endpoints[0]!.address}:80`;
    const one = await server.admin('PATCH', `/api/v1/services/heavy/endpoints/${encodeURIComponent(first)}`, {
      weight: MAX_WEIGHT,
    });
    assert.equal(one.status, 400, JSON.stringify(one.body));
    assert.equal((one.body as ErrorBody).error.code, 'CANOPY_INVALID_SERVICE');
    assert.deepEqual(
      (one.body as ErrorBody).error.fields?.map((f) => f.path),
      ['weight'],
    );
    assert.match((one.body as ErrorBody).error.fields![0]!.message, /uint32/);
    const bulk = await server.admin('PATCH', '/api/v1/services/heavy/endpoints', {
      upsert: [{ address: '10.99.0.1', port: 80, weight: MAX_WEIGHT }],
    });
    assert.equal(bulk.status, 400);
    // Lowering weights is always allowed, and the refused changes left nothing behind.
    const lower = await server.admin('PATCH', `/api/v1/services/heavy/endpoints/${encodeURIComponent(first)}`, {
      weight: 2,
    });
    assert.equal(lower.status, 200);
    const held = (await server.admin('GET', '/api/v1/services/heavy')).body as { endpoints: unknown[] };
    assert.equal(held.endpoints.length, 4295);
  });

  it('the Host check against DNS rebinding covers reads, not only writes', async () => {
    const port = new URL(server.adminUrl).port;
    const get = (p: string, host: string) => rawGet(server.adminUrl, p, host);
    for (const p of ['/api/v1/services', '/api/v1/services/addr', '/debug/clients', '/ui/api/services']) {
      const res = await get(p, `rebind.attacker.example:${port}`);
      assert.equal(res.status, 421, `${p}: ${res.body}`);
      assert.equal((JSON.parse(res.body) as ErrorBody).error.code, 'CANOPY_MISDIRECTED');
    }
    assert.equal((await get('/api/v1/services', `127.0.0.1:${port}`)).status, 200);
    assert.equal((await get('/api/v1/services', `localhost:${port}`)).status, 200);
    assert.equal((await get('/readyz', `rebind.attacker.example:${port}`)).status, 200, 'probes stay open');
  });
});

describe('admin token file rotation', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-token-'));
  const tokenFile = path.join(dir, 'admin.token');
  let server: CanopyProcess;
  before(async () => {
    writeFileSync(tokenFile, 'first-token-0123456789\n');
    server = await startCanopyProcess({ services: [] }, ['--admin-token-file', tokenFile]);
  });
  after(async () => {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const list = (token: string) =>
    fetch(`${server.adminUrl}/api/v1/services`, { headers: { authorization: `Bearer ${token}` } }).then(
      (r) => r.status,
    );

  it('re-reads the token when the file changes: the new one works and the old one is refused, no restart', async () => {
    assert.equal(await list('first-token-0123456789'), 200);
    assert.equal(await list('second-token-0123456789'), 401);
    // Rotated as a secret manager does: a new file renamed over the old one.
    writeFileSync(`${tokenFile}.new`, 'second-token-0123456789\n');
    renameSync(`${tokenFile}.new`, tokenFile);
    await until(async () => (await list('second-token-0123456789')) === 200, 10_000);
    assert.equal(await list('first-token-0123456789'), 401);
    // A bad rotation (too short) keeps the token in force and is logged.
    writeFileSync(tokenFile, 'short\n');
    await until(async () => server.logs().some((l) => l.includes('shorter than 16')), 10_000);
    assert.equal(await list('second-token-0123456789'), 200);
    assert.equal(await list('short'), 401);
  });
});

function rawGet(base: string, p: string, host: string): Promise<{ status: number; body: string }> {
  const url = new URL(p, base);
  return new Promise((resolve, reject) => {
    const req = http.request(
      { hostname: url.hostname, port: url.port, path: url.pathname, headers: { host } },
      (res) => {
        let body = '';
        res.on('data', (c: Buffer) => (body += c.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on('error', reject);
    req.end();
  });
}

async function until(cond: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 100));
  }
}
