/**
 * TLS on both ports and mTLS on xDS, with certificates made by the test
 * (openssl): a real gRPC TLS client gets its CLA only when its certificate's
 * SPIFFE ID names its node; the admin API answers over HTTPS with a token.
 */
import assert from 'node:assert/strict';
import https from 'node:https';
import { rmSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { pino } from 'pino';
import { parseConfig } from '../server/src/domain/spec.js';
import { startCanopy, type Canopy } from '../server/src/main.js';
import { hasOpenssl, makeTestCa, type TestCa } from './support/certs.js';
import { RawAdsStream } from './support/raw-ads.js';

const EDS = 'type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment';
const TOKEN = 'tls-test-token-0123456789';
const missing = !hasOpenssl();
const skip = missing && process.env['CI'] !== 'true' ? 'openssl is not installed (Debian package openssl)' : false;

describe('TLS and mTLS', { skip }, () => {
  let ca: TestCa;
  let canopy: Canopy;

  before(async () => {
    assert.ok(!missing, 'openssl is required under CI');
    ca = makeTestCa();
    const server = ca.server();
    const config = parseConfig({ services: [{ name: 'echo', endpoints: [{ address: '10.0.0.1', port: 80 }] }] });
    assert.ok(config.ok);
    canopy = await startCanopy({
      config: config.value,
      host: '127.0.0.1',
      xdsPort: 0,
      adminPort: 0,
      logger: pino({ level: 'silent' }),
      security: { tls: { cert: server.cert, key: server.key, clientCa: ca.caCert }, adminToken: TOKEN },
    });
  });
  after(async () => {
    await canopy?.stop();
    if (ca) rmSync(ca.dir, { recursive: true, force: true });
  });

  const stream = (pem?: { cert: Buffer; key: Buffer }) =>
    new RawAdsStream(
      canopy.xdsAddress,
      {},
      false,
      grpc.credentials.createSsl(ca.caCert, pem?.key ?? null, pem?.cert ?? null),
    );

  it('serves a client whose certificate names its node', async () => {
    const ads = stream(ca.client('spiffe://canopy.test/ns/default/client-a'));
    try {
      ads.send({ type_url: EDS, node: { id: 'client-a' }, resource_names: ['echo'] });
      const r = await ads.next(5000);
      assert.equal(r.type_url, EDS);
      assert.equal(r.resources.length, 1);
    } finally {
      ads.close();
    }
  });

  it('refuses a client posing as another node, with PERMISSION_DENIED', async () => {
    const ads = stream(ca.client('spiffe://canopy.test/ns/default/client-a'));
    try {
      ads.send({ type_url: EDS, node: { id: 'client-b' }, resource_names: ['echo'] });
      assert.equal(await ads.maybeNext(1500), undefined);
      assert.equal(ads.error?.code, grpc.status.PERMISSION_DENIED);
      assert.match(ads.error?.details ?? '', /does not match the client certificate/);
    } finally {
      ads.close();
    }
  });

  it('refuses a client without a certificate, and one signed by another CA', async () => {
    const bare = stream();
    const other = makeTestCa('another-ca');
    const stranger = stream(other.client('spiffe://canopy.test/ns/default/client-a'));
    try {
      for (const ads of [bare, stranger]) {
        ads.send({ type_url: EDS, node: { id: 'client-a' }, resource_names: ['echo'] });
        assert.equal(await ads.maybeNext(1500), undefined);
        assert.equal(ads.error?.code, grpc.status.UNAVAILABLE);
      }
    } finally {
      bare.close();
      stranger.close();
      rmSync(other.dir, { recursive: true, force: true });
    }
  });

  it('serves the admin API over HTTPS: probes open, writes with the token', async () => {
    assert.equal((await request('GET', '/healthz')).status, 200);
    assert.equal((await request('PUT', '/api/v1/services/s', { endpoints: [] })).status, 401);
    assert.equal((await request('PUT', '/api/v1/services/s', { endpoints: [] }, TOKEN)).status, 201);
  });

  function request(method: string, path: string, body?: unknown, token?: string): Promise<{ status: number }> {
    const [host, port] = [
      canopy.adminAddress.slice(0, canopy.adminAddress.lastIndexOf(':')),
      canopy.adminAddress.split(':').pop(),
    ];
    return new Promise((resolve, reject) => {
      const req = https.request(
        {
          host,
          port: Number(port),
          path,
          method,
          ca: ca.caCert,
          headers: {
            ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
            ...(token ? { authorization: `Bearer ${token}` } : {}),
          },
        },
        (res) => {
          res.resume();
          res.on('end', () => resolve({ status: res.statusCode ?? 0 }));
        },
      );
      req.on('error', reject);
      req.end(body !== undefined ? JSON.stringify(body) : undefined);
    });
  }
});
