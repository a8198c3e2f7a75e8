/**
 * kubectl's habits in `canopy`, against a real `canopy serve`: positional names (`get service web`,
 * `get ep web`), short and singular aliases, `-o wide|name|jsonpath=…` (kubectl's `{…}` template),
 * `-o=json` and `--output=json`, `--no-headers`, `delete service NAME`, `version`; and the errors
 * that name their fix: `proxy-status` pointed at the admin port, a server down before `apply` (nothing
 * applied), a server killed while `apply` waits for its answer (all or none: check with get).
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { load } from 'js-yaml';
import { runCanopyCli } from './support/canopy-cli.js';
import { startCanopyProcess, type CanopyProcess } from './support/canopy-process.js';
import { startTcpProxy } from './support/tcp-proxy.js';

const PKG = JSON.parse(readFileSync(fileURLToPath(new URL('../../package.json', import.meta.url)), 'utf8')) as {
  version: string;
};

const MESH = {
  services: [
    {
      name: 'web',
      endpoints: [
        { address: '10.0.0.10', port: 80, locality: { region: 'r1', zone: 'z1' }, network: 'n1' },
        { address: '10.0.0.2', port: 80, locality: { region: 'r1', zone: 'z2' }, labels: { tier: 'a' } },
      ],
    },
    { name: 'api', endpoints: [{ address: '10.0.1.1', port: 9, locality: { region: 'r2', zone: 'z1' } }] },
  ],
};

async function freePort(): Promise<number> {
  const srv = net.createServer();
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
  const port = (srv.address() as net.AddressInfo).port;
  await new Promise((resolve) => srv.close(resolve));
  return port;
}

describe('canopy with kubectl habits', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-kubectl-'));
  let server: CanopyProcess;
  before(async () => {
    server = await startCanopyProcess(MESH);
  });
  after(async () => {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });
  const get = (...args: string[]) => runCanopyCli(['get', ...args, '--admin', server.adminUrl]);

  it('positional names and aliases: get service web, get svc, get ep web, get endpoint web', async () => {
    const one = await get('service', 'web');
    assert.equal(one.code, 0, one.stderr);
    assert.deepEqual(
      one.stdout
        .trimEnd()
        .split('\n')
        .map((l) => l.split(/\s+/)[0]),
      ['NAME', 'web'],
    );
    const all = await get('svc');
    assert.match(all.stdout, /\napi\s+1\s+1\s/);
    assert.match(all.stdout, /\nweb\s+2\s+2\s/);
    for (const kind of ['ep', 'endpoint', 'endpoints']) {
      const ep = await get(kind, 'web');
      assert.equal(ep.code, 0, ep.stderr);
      assert.deepEqual(
        ep.stdout
          .trimEnd()
          .split('\n')
          .slice(1)
          .map((l) => l.split(/\s+/)[1]),
        ['10.0.0.2', '10.0.0.10'],
        kind,
      );
    }
    const missing = await get('service', 'nope');
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /no service "nope"/);
  });

  it('-o wide, -o name, --no-headers', async () => {
    const wide = await get('ep', 'web', '-o', 'wide');
    assert.match(wide.stdout, /^SERVICE\s+ADDRESS\s+PORT\s+LOCALITY\s+HEALTH\s+WEIGHT\s+NETWORK\s+NODE\s+LABELS\n/);
    assert.match(wide.stdout, /\nweb\s+10\.0\.0\.2\s+80\s+r1\/z2\s+healthy\s+1\s+-\s+-\s+tier=a\n/);
    assert.match(wide.stdout, /\nweb\s+10\.0\.0\.10\s+80\s+r1\/z1\s+healthy\s+1\s+n1\s+-\s+-\n/);
    const svcWide = await get('svc', 'web', '-o', 'wide');
    assert.match(
      svcWide.stdout,
      /^NAME\s+ENDPOINTS\s+HEALTHY\s+MODE\s+PORT\s+VIP\s+DRAINING\s+UNHEALTHY\s+LOCALITIES\n/,
    );
    const names = await get('svc', '-o', 'name');
    assert.equal(names.stdout, 'service/api\nservice/web\n');
    const epNames = await get('ep', 'web', '-o', 'name');
    assert.equal(epNames.stdout, 'endpoint/web/10.0.0.2:80\nendpoint/web/10.0.0.10:80\n');
    const bare = await get('svc', '--no-headers');
    assert.equal(bare.code, 0, bare.stderr);
    assert.deepEqual(
      bare.stdout
        .trimEnd()
        .split('\n')
        .map((l) => l.split(/\s+/)[0]),
      ['api', 'web'],
    );
  });

  it('-o=json, --output=json, --output yaml and -o jsonpath', async () => {
    for (const flag of [['-o=json'], ['--output=json'], ['-ojson']]) {
      const r = await get('svc', ...flag);
      assert.equal(r.code, 0, `${flag.join(' ')}: ${r.stderr}`);
      assert.deepEqual(
        (JSON.parse(r.stdout) as { services: { name: string }[] }).services.map((s) => s.name),
        ['api', 'web'],
      );
    }
    const yaml = await get('ep', 'api', '--output', 'yaml');
    assert.equal((load(yaml.stdout) as { endpoints: { address: string }[] }).endpoints[0]?.address, '10.0.1.1');
    const template = await get('svc', '-o', 'jsonpath={.services[*].name}');
    assert.equal(template.stdout, 'api web\n');
    const lines = await get('ep', 'web', '-o', 'jsonpath={.endpoints[*].address}{"\\n"}');
    assert.equal(lines.stdout, '10.0.0.2 10.0.0.10\n');
    const bare = await get('svc', 'web', '-o', 'jsonpath=$.services[0].endpoints.length');
    assert.equal(bare.stdout, '2\n');
    const bad = await get('svc', '-o', 'xml');
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /-o, --output <format>.*must be one of table, wide, name, json, yaml, jsonpath=EXPR/);
  });

  it('version and --version print the package version', async () => {
    const v = await runCanopyCli(['version']);
    assert.equal(v.code, 0, v.stderr);
    assert.equal(v.stdout, `canopy ${PKG.version} (Node.js ${process.version})\n`);
    const json = await runCanopyCli(['version', '-o', 'json']);
    assert.deepEqual(JSON.parse(json.stdout), { canopy: PKG.version, node: process.version });
    assert.equal((await runCanopyCli(['--version'])).stdout, `${PKG.version}\n`);
  });

  it('delete service NAME removes it through the admin API; a missing one is named, exit 1', async () => {
    const file = path.join(dir, 'extra.yaml');
    writeFileSync(
      file,
      JSON.stringify({ services: [{ name: 'gone', endpoints: [{ address: '10.9.0.1', port: 1 }] }] }),
    );
    assert.equal((await runCanopyCli(['apply', '-f', file, '--admin', server.adminUrl])).code, 0);
    const del = await runCanopyCli(['delete', 'service', 'gone', 'nope', '--admin', server.adminUrl]);
    assert.equal(del.code, 1);
    assert.equal(del.stdout, 'service/gone deleted\n');
    assert.match(del.stderr, /service\/nope not deleted: 404/);
    assert.equal((await server.admin('GET', '/api/v1/services/gone')).status, 404);
  });

  it('proxy-status pointed at the admin port names --xds HOST:PORT', async () => {
    const r = await runCanopyCli(['proxy-status', '--xds', new URL(server.adminUrl).host]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /does not speak gRPC \(is it the admin port\?\); give the xDS port with --xds HOST:PORT/);
    assert.doesNotMatch(r.stderr, /Resolution note/);
  });

  it('apply against a server that is down says nothing was applied', async () => {
    const file = path.join(dir, 'down.yaml');
    writeFileSync(file, JSON.stringify(MESH));
    const r = await runCanopyCli(['apply', '-f', file, '--admin', `127.0.0.1:${await freePort()}`]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /ECONNREFUSED.*; nothing was applied\n$/);
  });
});

describe('canopy apply when the server is killed mid-apply', () => {
  it('says the server may hold all of the file or none of it, and how to check', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-apply-kill-'));
    const server = await startCanopyProcess(MESH);
    const admin = new URL(server.adminUrl);
    let killed: Promise<void> | undefined;
    // The server is killed (kill -9) as the apply request reaches it, before it can answer.
    const proxy = await startTcpProxy({ host: admin.hostname, port: Number(admin.port) }, (chunk) => {
      if (!killed && chunk.includes('POST /api/v1/apply')) killed = server.kill();
    });
    try {
      const file = path.join(dir, 'next.yaml');
      writeFileSync(
        file,
        JSON.stringify({ services: [{ name: 'new', endpoints: [{ address: '10.8.0.1', port: 1 }] }] }),
      );
      const r = await runCanopyCli(['apply', '-f', file, '--admin', proxy.address]);
      assert.ok(killed, 'the apply request reached the server');
      assert.equal(r.code, 1);
      assert.match(r.stderr, /went away before it answered/);
      assert.match(
        r.stderr,
        /the file is applied whole or not at all, so the server may hold all of it or none of it: check with `canopy get services`/,
      );
      assert.doesNotMatch(r.stderr, /\n\s+at /);
    } finally {
      await proxy.close();
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
