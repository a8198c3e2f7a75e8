/**
 * What `canopy bootstrap envoy`'s flags give a real Envoy 1.40, with no listener of the test's own:
 * - `--lazy --demand other`: the sidecar holds only `other`'s Cluster, yet its first request to `web`
 *   (outside the demand set) is answered: Canopy's own listener runs Envoy's on_demand filter, which
 *   fetches the Cluster over on-demand CDS before the router sends the request;
 * - `--api sotw`: a state-of-the-world ADS stream that routes;
 * - `--ca-file --cert-file --key-file`: the sidecar reaches a `canopy serve` with TLS and mTLS on xDS.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { runCanopyCli } from './support/canopy-cli.js';
import { startCanopyProcess, type CanopyProcess } from './support/canopy-process.js';
import { hasOpenssl, makeTestCa, type TestCa } from './support/certs.js';
import { EnvoyProcess, envoySkip, explainFailure } from './support/envoy-process.js';
import { sendRequests, startHttpBackend, type HttpBackend } from './support/http-backends.js';

const skip = envoySkip();
const loc = { region: 'r1', zone: 'z1', subzone: 's1' };

const service = (name: string, port: number, b: HttpBackend) => ({
  name,
  port,
  protocol: 'http',
  endpoints: [{ address: b.host, port: b.port, locality: loc }],
});

describe('canopy bootstrap envoy --lazy, --demand, --api on real Envoy', { skip }, () => {
  let canopy: CanopyProcess;
  const envoys: EnvoyProcess[] = [];
  const backends: HttpBackend[] = [];

  before(async () => {
    for (const h of ['127.0.71.1', '127.0.71.2']) backends.push(await startHttpBackend(h));
    canopy = await startCanopyProcess({
      server: { debounceMs: 20 },
      services: [
        service('web', 8081, backends[0]!),
        service('other', 8082, backends[1]!),
        // A Kubernetes endpoint that is serving and terminating, beside a ready one (docs/kubernetes.md).
        {
          ...service('ending', 8083, backends[0]!),
          endpoints: [
            { address: backends[0]!.host, port: backends[0]!.port, locality: loc },
            { address: backends[1]!.host, port: backends[1]!.port, locality: loc, health: 'terminating' },
          ],
        },
      ],
    });
  });
  after(async () => {
    await Promise.all(envoys.map((e) => e.stop()));
    await canopy?.stop();
    await Promise.all(backends.map((b) => b.close()));
  });

  it('--lazy: the first request to a service outside the demand set is answered (on-demand CDS)', () =>
    explainFailure(
      () => envoys,
      async () => {
        const envoy = await EnvoyProcess.start({
          xds: canopy.xdsUri,
          nodeId: 'boot-lazy',
          locality: loc,
          outboundAddress: '127.0.72.1',
          bootstrapArgs: ['--lazy', '--demand', 'other'],
        });
        envoys.push(envoy);
        const listeners = async () => JSON.stringify(JSON.parse((await envoy.get('/listeners?format=json')).text));
        await envoy.until(async () => (await listeners()).includes('"port_value":8081'), 10_000, 'web listener');
        const held = (await envoy.clusters()).map((c) => c.name).filter((n) => n !== 'canopy');
        assert.deepEqual(held, ['other'], 'a lazy sidecar holds its demand set only');
        const t = await sendRequests('127.0.72.1:8081', 1, { concurrency: 1 });
        assert.deepEqual([...t.by], [['127.0.71.1', 1]], `first request: ${JSON.stringify([...t.failed])}`);
        assert.ok(
          (await envoy.clusters()).some((c) => c.name === 'web'),
          'web fetched on demand',
        );
        assert.ok((await envoy.stat('cluster_manager.odcds.update_success'))! >= 1, 'over on-demand CDS');
      },
    ));

  it('--api sotw: a state-of-the-world stream that routes', () =>
    explainFailure(
      () => envoys,
      async () => {
        const envoy = await EnvoyProcess.start({
          xds: canopy.xdsUri,
          nodeId: 'boot-sotw',
          locality: loc,
          outboundAddress: '127.0.72.2',
          ads: 'sotw',
        });
        envoys.push(envoy);
        const dump = JSON.stringify(await envoy.configDump());
        assert.ok(dump.includes('"api_type":"GRPC"'), 'the bootstrap asks for SotW');
        await envoy.until(
          async () => (await sendRequests('127.0.72.2:8082', 1, { concurrency: 1 })).by.get('127.0.71.2') === 1,
          10_000,
          'a request to other answered',
        );
        assert.equal(await envoy.stat('control_plane.connected_state'), 1);
      },
    ));

  it('a terminating endpoint reaches Envoy as UNHEALTHY in its priority (unhealthy: count), never DRAINING', () =>
    explainFailure(
      () => envoys,
      async () => {
        const envoy = await EnvoyProcess.start({
          xds: canopy.xdsUri,
          nodeId: 'boot-ending',
          locality: loc,
          outboundAddress: '127.0.72.4',
        });
        envoys.push(envoy);
        const hosts = async () => (await envoy.clusters()).find((c) => c.name === 'ending')?.hosts ?? [];
        await envoy.until(async () => (await hosts()).length === 2, 10_000, 'both endpoints of ending');
        const byAddress = new Map((await hosts()).map((h) => [h.address.split(':')[0], h]));
        assert.equal(byAddress.get('127.0.71.2')?.edsHealth, 'UNHEALTHY');
        assert.equal(byAddress.get('127.0.71.2')?.priority, 0, 'kept in its priority');
        assert.equal(byAddress.get('127.0.71.1')?.edsHealth, 'HEALTHY');
      },
    ));
});

const noSsl = !hasOpenssl();
const tlsSkip =
  skip || (noSsl && process.env['CI'] !== 'true' ? 'openssl is not installed (Debian package openssl)' : false);

describe(
  'canopy bootstrap envoy --ca-file --cert-file --key-file against canopy serve with mTLS',
  { skip: tlsSkip },
  () => {
    let ca: TestCa;
    let canopy: CanopyProcess;
    let envoy: EnvoyProcess | undefined;
    let backend: HttpBackend;

    before(async () => {
      assert.ok(!noSsl, 'openssl is required under CI');
      ca = makeTestCa();
      const server = ca.server();
      backend = await startHttpBackend('127.0.71.3');
      canopy = await startCanopyProcess({ services: [service('web', 8081, backend)] }, [
        ...['--tls-cert', server.certFile, '--tls-key', server.keyFile, '--client-ca', ca.caFile],
      ]);
    });
    after(async () => {
      await envoy?.stop();
      await canopy?.stop();
      await backend?.close();
      if (ca) rmSync(ca.dir, { recursive: true, force: true });
    });

    it('the sidecar verifies Canopy, presents its SPIFFE certificate and routes', () =>
      explainFailure(
        () => (envoy ? [envoy] : []),
        async () => {
          const client = ca.client('spiffe://canopy.test/ns/default/boot-tls');
          envoy = await EnvoyProcess.start({
            xds: canopy.xdsUri,
            nodeId: 'boot-tls',
            locality: loc,
            outboundAddress: '127.0.72.3',
            bootstrapArgs: ['--ca-file', ca.caFile, '--cert-file', client.certFile, '--key-file', client.keyFile],
          });
          await envoy.until(
            async () => (await sendRequests('127.0.72.3:8081', 1, { concurrency: 1 })).by.get('127.0.71.3') === 1,
            10_000,
            'a request to web answered over a TLS xDS stream',
          );
          const ssl = await envoy.stat('cluster.canopy.ssl.handshake');
          assert.ok(ssl !== undefined && ssl >= 1, `TLS handshakes to Canopy: ${ssl}`);
        },
      ));
  },
);

describe('canopy bootstrap --ca-file: what the files become, and what is refused', () => {
  it('grpc: tls channel_creds (gRFC A65) with absolute paths; the flags checked before anything is written', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-boot-'));
    for (const f of ['ca.pem', 'c.pem', 'c.key']) writeFileSync(path.join(dir, f), 'x');
    const run = (...args: string[]) => runCanopyCli(['bootstrap', ...args, '--node-id', 'n1'], 10_000);
    const cwdRelative = path.relative(process.cwd(), dir);
    const ok = await run(
      'grpc',
      '--ca-file',
      `${cwdRelative}/ca.pem`,
      '--cert-file',
      `${dir}/c.pem`,
      '--key-file',
      `${dir}/c.key`,
    );
    assert.equal(ok.code, 0, ok.stderr);
    const creds = (JSON.parse(ok.stdout) as { xds_servers: { channel_creds: unknown[] }[] }).xds_servers[0]!
      .channel_creds;
    assert.deepEqual(creds, [
      {
        type: 'tls',
        config: {
          ca_certificate_file: path.join(dir, 'ca.pem'),
          certificate_file: path.join(dir, 'c.pem'),
          private_key_file: path.join(dir, 'c.key'),
        },
      },
    ]);
    const halves = await run('envoy', '--ca-file', `${dir}/ca.pem`, '--cert-file', `${dir}/c.pem`);
    assert.equal(halves.code, 2);
    assert.match(halves.stderr, /--cert-file and --key-file go together/);
    const missing = await run('envoy', '--ca-file', `${dir}/nope.pem`);
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, /--ca-file: cannot read .*nope\.pem/);
    const lazyGrpc = await run('grpc', '--lazy');
    assert.equal(lazyGrpc.code, 2);
    assert.match(lazyGrpc.stderr, /for envoy bootstraps/);
    rmSync(dir, { recursive: true, force: true });
  });
});
