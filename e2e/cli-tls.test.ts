/**
 * The CLI against a `canopy serve` with docs/security.md's TLS on (HTTPS admin, TLS and mTLS on xDS,
 * an admin token), certificates made by openssl:
 * - without --ca-file a command fails naming --ca-file (no NODE_EXTRA_CA_CERTS needed); with it (or
 *   CANOPY_CA_FILE) get, health, apply, explain and delete work; a CA that did not sign the server's
 *   certificate is named;
 * - proxy-status reads CSDS over TLS with --ca-file and a client certificate (--cert-file, --key-file);
 *   plaintext against the TLS port names --ca-file;
 * - a missing token and a wrong one read differently, both naming --token-file and CANOPY_ADMIN_TOKEN.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { hasOpenssl, makeTestCa, type Pem, type TestCa } from './support/certs.js';
import { runCanopyCli } from './support/canopy-cli.js';
import { startCanopyProcess, type CanopyProcess } from './support/canopy-process.js';

const TOKEN = 'cli-tls-token-0123456789';
const missing = !hasOpenssl();
const skip = missing && process.env['CI'] !== 'true' ? 'openssl is not installed (Debian package openssl)' : false;

const MESH = {
  services: [
    {
      name: 'web',
      endpoints: [
        { address: '10.0.0.1', port: 80, locality: { region: 'r1', zone: 'z1' } },
        { address: '10.0.0.2', port: 80, locality: { region: 'r1', zone: 'z2' } },
      ],
    },
  ],
};

describe('the CLI against a TLS server', { skip }, () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-cli-tls-'));
  const tokenFile = path.join(dir, 'admin-token');
  let ca: TestCa;
  let client: Pem;
  let server: CanopyProcess;
  let https: string;
  before(async () => {
    assert.ok(!missing, 'openssl is required under CI');
    ca = makeTestCa();
    const cert = ca.server();
    client = ca.client('spiffe://canopy.test/ns/default/operator');
    writeFileSync(tokenFile, `${TOKEN}\n`);
    server = await startCanopyProcess(MESH, [
      ...['--tls-cert', cert.certFile, '--tls-key', cert.keyFile, '--client-ca', ca.caFile],
      ...['--admin-token-file', tokenFile],
    ]);
    https = server.adminUrl.replace(/^http:/, 'https:');
  });
  after(async () => {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
    if (ca) rmSync(ca.dir, { recursive: true, force: true });
  });

  it('without --ca-file: the error names --ca-file; with it, or CANOPY_CA_FILE, get works', async () => {
    const bare = await runCanopyCli(['get', 'services', '--admin', https, '--token-file', tokenFile]);
    assert.equal(bare.code, 1);
    assert.match(bare.stderr, /UNABLE_TO_VERIFY_LEAF_SIGNATURE.*--ca-file FILE \(or CANOPY_CA_FILE\)/);
    assert.doesNotMatch(bare.stderr, /\n\s+at /);
    const flag = await runCanopyCli([
      ...['get', 'services', '--admin', https],
      ...['--ca-file', ca.caFile, '--token-file', tokenFile],
    ]);
    assert.equal(flag.code, 0, flag.stderr);
    assert.match(flag.stdout, /\nweb\s+2\s+2\s/);
    const env = await runCanopyCli(['get', 'endpoints', 'web', '-o', 'name'], 20_000, {
      CANOPY_CA_FILE: ca.caFile,
      CANOPY_ADMIN_URL: https,
      CANOPY_ADMIN_TOKEN: TOKEN,
    });
    assert.equal(env.code, 0, env.stderr);
    assert.equal(env.stdout, 'endpoint/web/10.0.0.1:80\nendpoint/web/10.0.0.2:80\n');
  });

  it('a CA that did not sign the server certificate is named', async () => {
    const other = makeTestCa('another-ca');
    try {
      const r = await runCanopyCli(['get', 'services', '--admin', https, '--ca-file', other.caFile]);
      assert.equal(r.code, 1);
      assert.match(r.stderr, new RegExp(`not signed by --ca-file ${other.caFile.replace(/[.]/g, '\\.')}`));
    } finally {
      rmSync(other.dir, { recursive: true, force: true });
    }
  });

  it('health, apply, explain and delete take --ca-file', async () => {
    const tls = ['--admin', https, '--ca-file', ca.caFile, '--token-file', tokenFile];
    const health = await runCanopyCli(['health', 'web', '10.0.0.2:80', 'draining', ...tls]);
    assert.equal(health.code, 0, health.stderr);
    assert.match(health.stdout, /web\/10\.0\.0\.2:80 healthy → draining/);
    const file = path.join(dir, 'more.yaml');
    writeFileSync(file, JSON.stringify({ services: [{ name: 'api', endpoints: [{ address: '10.0.1.1', port: 9 }] }] }));
    const apply = await runCanopyCli(['apply', '-f', file, ...tls]);
    assert.equal(apply.code, 0, apply.stderr);
    assert.match(apply.stdout, /^service\/api created/);
    const explain = await runCanopyCli(['explain', '--service', 'web', '--region', 'r1', '-o', 'json', ...tls]);
    assert.equal(explain.code, 0, explain.stderr);
    assert.equal((JSON.parse(explain.stdout) as { service: string }).service, 'web');
    const del = await runCanopyCli(['delete', 'svc', 'api', ...tls]);
    assert.equal(del.code, 0, del.stderr);
    assert.equal(del.stdout, 'service/api deleted\n');
  });

  it('proxy-status over TLS with a client certificate; plaintext to the TLS port names --ca-file', async () => {
    const xds = ['--xds', server.xdsUri, '--token-file', tokenFile];
    const ok = await runCanopyCli([
      ...['proxy-status', ...xds, '--ca-file', ca.caFile],
      ...['--cert-file', client.certFile, '--key-file', client.keyFile],
    ]);
    assert.equal(ok.code, 0, ok.stderr);
    assert.match(ok.stdout, /^NODE\s+CLUSTER\s+LOCALITY\s+LDS/);
    assert.equal(ok.stderr, '', 'no warning (DEP0123 for an IP in SNI)');
    const plain = await runCanopyCli(['proxy-status', ...xds]);
    assert.equal(plain.code, 1);
    assert.match(plain.stderr, /if the server has TLS on, give --ca-file FILE/);
    const noCert = await runCanopyCli(['proxy-status', ...xds, '--ca-file', ca.caFile]);
    assert.equal(noCert.code, 1);
    assert.match(
      noCert.stderr,
      /the server requires a client certificate: give --cert-file FILE and --key-file FILE\n$/,
    );
    assert.doesNotMatch(noCert.stderr, /Resolution note/);
    const half = await runCanopyCli(['proxy-status', ...xds, '--cert-file', client.certFile]);
    assert.equal(half.code, 2);
    assert.match(half.stderr, /--cert-file and --key-file go together/);
  });

  it('a missing token and a wrong one read differently, each naming its fix', async () => {
    const tls = ['--admin', https, '--ca-file', ca.caFile];
    const none = await runCanopyCli(['get', 'services', ...tls]);
    assert.equal(none.code, 1);
    assert.match(none.stderr, /needs the admin token \(401\): give --token-file FILE, or set CANOPY_ADMIN_TOKEN/);
    const wrongFile = path.join(dir, 'wrong-token');
    writeFileSync(wrongFile, 'not-the-token-0123456789\n');
    const wrong = await runCanopyCli(['get', 'services', ...tls, '--token-file', wrongFile]);
    assert.equal(wrong.code, 1);
    assert.match(
      wrong.stderr,
      new RegExp(`refused the admin token from --token-file ${wrongFile.replace(/[.]/g, '\\.')}`),
    );
    assert.match(wrong.stderr, /it is not the server's token/);
    const wrongEnv = await runCanopyCli(['get', 'services', ...tls], 20_000, {
      CANOPY_ADMIN_TOKEN: 'not-the-token-0123456789',
    });
    assert.match(wrongEnv.stderr, /refused the admin token from CANOPY_ADMIN_TOKEN \(401\)/);
    const ps = await runCanopyCli([
      ...['proxy-status', '--xds', server.xdsUri, '--ca-file', ca.caFile],
      ...['--cert-file', client.certFile, '--key-file', client.keyFile, '--token-file', wrongFile],
    ]);
    assert.equal(ps.code, 1);
    assert.match(ps.stderr, /refused the admin token from --token-file/);
  });
});
