/**
 * The running server with a watched config file, driven over real HTTP: an
 * edit written in two steps is applied once, whole, and deletes nothing; an
 * edit of one service leaves an API PATCH and an API-created service alone.
 */
import assert from 'node:assert/strict';
import { closeSync, fsyncSync, mkdtempSync, openSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { pino } from 'pino';
import { dump as stringify } from 'js-yaml';
import type { MeshChange } from '../server/src/domain/mesh.js';
import { parseConfig } from '../server/src/domain/spec.js';
import { startCanopy, type Canopy } from '../server/src/main.js';

const endpoints = (n: number, port: number) =>
  Array.from({ length: n }, (_, i) => ({
    address: `10.0.1.${i + 1}`,
    port,
    locality: { region: 'r1', zone: `z${i % 3}` },
  }));

const fileConfig = (bigPort: number, otherPort = 80) => ({
  services: [
    { name: 'big', endpoints: endpoints(20, bigPort) },
    { name: 'other', endpoints: [{ address: '10.0.2.1', port: otherPort }] },
  ],
});

describe('config file and API together', () => {
  let dir: string;
  let file: string;
  let canopy: Canopy;
  const changes: MeshChange[] = [];
  /** Every endpoint count `big` had after each change: a partial file would show up here. */
  const bigSizes: number[] = [];

  before(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-own-'));
    file = path.join(dir, 'mesh.yaml');
    writeFileSync(file, stringify(fileConfig(80)));
    const parsed = parseConfig(fileConfig(80));
    assert.ok(parsed.ok);
    canopy = await startCanopy({
      config: parsed.value,
      configPath: file,
      host: '127.0.0.1',
      xdsPort: 0,
      adminPort: 0,
      logger: pino({ level: 'silent' }),
    });
    canopy.feed.subscribe((c) => {
      changes.push(...c);
      bigSizes.push(canopy.mesh.get('big')?.endpoints.size ?? 0);
    });
  });
  after(async () => {
    await canopy?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const admin = async (method: string, p: string, body?: unknown) => {
    const res = await fetch(`http://${canopy.adminAddress}${p}`, {
      method,
      ...(body !== undefined ? { body: JSON.stringify(body), headers: { 'content-type': 'application/json' } } : {}),
    });
    return res.status;
  };

  it('an edit written as 30%, a 400 ms pause, then the rest: applied once, whole; nothing deleted', async () => {
    const text = stringify(fileConfig(81));
    const cut = text.indexOf('\n', Math.floor(text.length * 0.3)) + 1;
    const fd = openSync(file, 'w');
    writeSync(fd, text.slice(0, cut));
    fsyncSync(fd);
    await sleep(400);
    writeSync(fd, text.slice(cut));
    closeSync(fd);
    await until(() => canopy.mesh.get('big')?.spec.endpoints[0]?.port === 81);
    await sleep(1500);
    assert.deepEqual(
      changes.filter((c) => c.kind === 'deleted'),
      [],
      'no service deleted',
    );
    assert.ok(
      bigSizes.every((n) => n === 20),
      `big always had 20 endpoints, had ${bigSizes}`,
    );
    assert.equal(canopy.mesh.get('other')?.endpoints.size, 1);
  });

  it('an API PATCH and an API-created service stay when another service in the file is edited', async () => {
    assert.equal(await admin('PATCH', '/api/v1/services/big/endpoints/10.0.1.1%3A81', { health: 'unhealthy' }), 200);
    assert.equal(
      await admin('PUT', '/api/v1/services/made-by-api', { endpoints: [{ address: '10.0.3.1', port: 80 }] }),
      201,
    );
    writeFileSync(file, stringify(fileConfig(81, 8080)));
    await until(() => canopy.mesh.get('other')?.spec.endpoints[0]?.port === 8080);
    assert.equal(canopy.mesh.get('big')?.endpoints.get('10.0.1.1:81')?.health, 'unhealthy');
    assert.ok(canopy.mesh.get('made-by-api'), 'the API-created service is still there');
  });
});

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

async function until(cond: () => boolean, timeoutMs = 10_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await sleep(20);
  }
}
