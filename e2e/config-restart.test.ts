/**
 * A restart of `canopy serve --config FILE --data-dir DIR` with the file
 * unchanged: the store already holds it, so the file is not parsed again
 * (a log line says so) and xDS serves the same bytes. The store stays the
 * source of truth: a file edited while the server was down is loaded, API
 * writes made between restarts survive, and a listed service deleted through
 * the API comes back as the ownership rule says (docs/operations.md).
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { dump as stringify } from 'js-yaml';
import { startCanopyProcess, type CanopyProcess } from './support/canopy-process.js';
import { RawAdsStream } from './support/raw-ads.js';

const CDS = 'type.googleapis.com/envoy.config.cluster.v3.Cluster';
const EDS = 'type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment';
const UNCHANGED = 'config file unchanged since the store applied it: not parsed again';

const ep = (address: string, zone: string) => ({ address, port: 80, locality: { region: 'r1', zone } });
const mesh = {
  server: { debounceMs: 20 },
  services: [
    { name: 'a', endpoints: [ep('10.0.0.1', 'z1'), ep('10.0.0.2', 'z1'), ep('10.0.0.3', 'z2')] },
    { name: 'b', endpoints: [ep('10.0.1.1', 'z1')] },
  ],
};
const edited = {
  ...mesh,
  services: [mesh.services[0]!, { name: 'b', endpoints: [ep('10.0.1.1', 'z1'), ep('10.0.1.2', 'z2')] }],
};

/** What a SotW client in r1/z1 is sent: every cluster and each service's CLA, as digests of their bytes. */
async function served(p: CanopyProcess, services: readonly string[]): Promise<Record<string, string>> {
  const s = new RawAdsStream(p.xdsUri);
  try {
    const node = { id: 'restart-test', locality: { region: 'r1', zone: 'z1' } };
    const out: Record<string, string> = {};
    s.send({ node, type_url: CDS, resource_names: [] });
    const cds = await s.next(10_000);
    for (const r of cds.resources) out[`cds:${createHash('sha256').update(r.value).digest('hex')}`] = 'cluster';
    s.send({ type_url: CDS, version_info: cds.version_info, response_nonce: cds.nonce, resource_names: [] });
    s.send({ node, type_url: EDS, resource_names: [...services] });
    const eds = await s.next(10_000);
    assert.equal(eds.resources.length, services.length, 'a CLA per service');
    for (const [i, r] of eds.resources.entries()) out[`eds:${i}`] = createHash('sha256').update(r.value).digest('hex');
    return out;
  } finally {
    s.close();
  }
}

const said = (p: CanopyProcess, text: string): boolean => p.logs().some((l) => l.includes(text));

async function until(ok: () => boolean | Promise<boolean>, what: string): Promise<void> {
  const deadline = Date.now() + 15_000;
  while (!(await ok())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('canopy serve: restart on the same data directory', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-restart-'));
  const running: CanopyProcess[] = [];
  const start = async (config: object, data: string): Promise<CanopyProcess> => {
    const p = await startCanopyProcess(config, ['--data-dir', path.join(dir, data)]);
    running.push(p);
    return p;
  };
  after(async () => {
    for (const p of running) await p.kill();
    rmSync(dir, { recursive: true, force: true });
  });

  it('with the file unchanged: not parsed again, the same xDS resources; an edited file is loaded', async () => {
    const first = await start(mesh, 'one');
    assert.ok(!said(first, UNCHANGED), 'a first start parses the file');
    const before = await served(first, ['a', 'b']);
    await first.stop();

    const second = await start(mesh, 'one');
    assert.ok(said(second, UNCHANGED), `the restart says the file was unchanged:\n${second.logs().join('\n')}`);
    assert.deepEqual(await served(second, ['a', 'b']), before, 'the same clusters and CLAs, byte for byte');
    await second.stop();

    // Edited while the server was down: loaded, not skipped.
    const third = await start(edited, 'one');
    assert.ok(!said(third, UNCHANGED), 'an edited file is parsed');
    assert.ok(said(third, '"replaced":1'), 'service b replaced from the edited file');
    const b = (await third.admin('GET', '/api/v1/services/b')).body as { endpoints: unknown[] };
    assert.equal(b.endpoints.length, 2);
    assert.notDeepEqual(await served(third, ['a', 'b']), before);

    // Edited under the running server (a reload): the restart with that content needs no parse either.
    writeFileSync(`${third.configPath}.tmp`, stringify(mesh));
    renameSync(`${third.configPath}.tmp`, third.configPath);
    await until(() => said(third, '"config reloaded"'), 'the reload');
    await third.stop();
    const fourth = await start(mesh, 'one');
    assert.ok(said(fourth, UNCHANGED), 'the reloaded content was recorded');
    assert.deepEqual(await served(fourth, ['a', 'b']), before);
    await fourth.stop();
  });

  it('the same file left alone is not even read; written with its modification time put back, it is applied', async () => {
    const file = path.join(dir, 'kept.yaml');
    writeFileSync(file, stringify(mesh));
    const settle = () => new Promise((r) => setTimeout(r, 2100));
    await settle();
    const serve = async (): Promise<CanopyProcess> => {
      const p = await startCanopyProcess({}, ['--data-dir', path.join(dir, 'three')], { configFile: file });
      running.push(p);
      return p;
    };
    const first = await serve();
    const before = await served(first, ['a', 'b']);
    await first.stop();
    const second = await serve();
    assert.ok(said(second, '"read":false'), `not read:\n${second.logs().join('\n')}`);
    assert.deepEqual(await served(second, ['a', 'b']), before);
    await second.stop();

    // Another endpoint address of the same length: the same size; the modification time put back to the ns.
    const old = statSync(file, { bigint: true });
    writeFileSync(file, stringify(mesh).replace('10.0.1.1', '10.0.1.9'));
    const ns = old.mtimeNs.toString();
    execFileSync('touch', ['-m', '-d', `@${ns.slice(0, -9)}.${ns.slice(-9)}`, file]);
    assert.equal(statSync(file, { bigint: true }).size, old.size);
    await settle();
    const third = await serve();
    assert.ok(!said(third, UNCHANGED), 'the written file is read and applied');
    const b = (await third.admin('GET', '/api/v1/services/b')).body as { endpoints: { address: string }[] };
    assert.deepEqual(
      b.endpoints.map((e) => e.address),
      ['10.0.1.9'],
    );
    await third.stop();
  });

  it('API writes made between restarts survive the unchanged file; a listed service deleted comes back', async () => {
    const first = await start(mesh, 'two');
    const patched = await first.admin('PATCH', '/api/v1/services/a/endpoints/10.0.0.1%3A80', { health: 'unhealthy' });
    assert.equal(patched.status, 200);
    const put = await first.admin('PUT', '/api/v1/services/c', { endpoints: [{ address: '10.0.2.1', port: 80 }] });
    assert.equal(put.status, 201);
    // An API PUT of a file-listed service takes it over until the file's entry changes (canopy apply does this).
    const takeover = await first.admin('PUT', '/api/v1/services/b', { endpoints: [{ address: '10.0.3.1', port: 80 }] });
    assert.ok(takeover.status === 200 || takeover.status === 201, `PUT b: ${takeover.status}`);
    await first.stop();

    const second = await start(mesh, 'two');
    assert.ok(said(second, UNCHANGED), 'still skipped: applying the file would change nothing');
    const a = (await second.admin('GET', '/api/v1/services/a')).body as {
      endpoints: { address: string; health: string }[];
    };
    assert.equal(a.endpoints.find((e) => e.address === '10.0.0.1')?.health, 'unhealthy', 'the PATCH survives');
    assert.equal((await second.admin('GET', '/api/v1/services/c')).status, 200, 'the API-created service survives');
    const b = (await second.admin('GET', '/api/v1/services/b')).body as { endpoints: { address: string }[] };
    assert.deepEqual(
      b.endpoints.map((e) => e.address),
      ['10.0.3.1'],
      'the API PUT of a listed service survives',
    );
    await until(
      () => said(second, 'keeps API changes over the unchanged config file: 1 endpoint(s) in 1 service(s): a.'),
      'the note',
    );
    // An API DELETE of a file-listed service lasts until the next restart, which lists it again.
    assert.equal((await second.admin('DELETE', '/api/v1/services/b')).status, 204);
    await second.stop();

    const third = await start(mesh, 'two');
    assert.ok(!said(third, UNCHANGED), 'the store no longer holds the file: it is applied');
    assert.equal((await third.admin('GET', '/api/v1/services/b')).status, 200, 'b is back from the file');
    const a3 = (await third.admin('GET', '/api/v1/services/a')).body as {
      endpoints: { address: string; health: string }[];
    };
    assert.equal(a3.endpoints.find((e) => e.address === '10.0.0.1')?.health, 'unhealthy', 'the PATCH still survives');
    assert.equal((await third.admin('GET', '/api/v1/services/c')).status, 200);
    await third.stop();
  });
});
