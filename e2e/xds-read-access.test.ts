/**
 * Who may read what on the xDS port, against a spawned `canopy serve` with
 * mTLS, an admin token and read rules for two tenants, with certificates made
 * by openssl and real gRPC clients: each tenant sees its own services and the
 * shared one, never the other's (SotW and delta, every type); a certificate
 * without a SPIFFE ID is refused; CSDS needs the admin token or an identity
 * allowed to read it.
 */
import assert from 'node:assert/strict';
import { rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { startCanopyProcess, type CanopyProcess } from './support/canopy-process.js';
import { hasOpenssl, makeTestCa, type Pem, type TestCa } from './support/certs.js';
import { RawAdsStream, RawDeltaStream, type RawResponse } from './support/raw-ads.js';

const LDS = 'type.googleapis.com/envoy.config.listener.v3.Listener';
const RDS = 'type.googleapis.com/envoy.config.route.v3.RouteConfiguration';
const CDS = 'type.googleapis.com/envoy.config.cluster.v3.Cluster';
const EDS = 'type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment';
const LEDS = 'type.googleapis.com/envoy.config.endpoint.v3.LbEndpoint';
const TREE = 'type.googleapis.com/canopy.v1.LocalityTree';
const TOKEN = 'read-access-test-token-0123456789';
const CSDS_FETCH = '/envoy.service.status.v3.ClientStatusDiscoveryService/FetchClientStatus';
const missing = !hasOpenssl();
const skip = missing && process.env['CI'] !== 'true' ? 'openssl is not installed (Debian package openssl)' : false;

const RULES = `# Two tenants and an operator: what each SPIFFE ID may read.
rules:
  - spiffe: spiffe://tenant-a.test/ns/a/**
    services: [a-*, shared]
  - spiffe: spiffe://tenant-b.test/ns/b/**
    services: [b-*, shared]
  - spiffe: spiffe://ops.test/csds-reader
    services: []
    csds: true
`;
const SERVICES = ['a-web', 'a-db', 'b-web', 'shared'];
const locality = { region: 'r1', zone: 'z1', sub_zone: 's1' };
/** The LEDS collection of a service's one leaf (routing preference region, zone, subzone). */
const glob = (service: string) => `xdstp://canopy/envoy.config.endpoint.v3.LbEndpoint/${service}/r1/z1/s1/*`;

/** The names in a SotW response (every resource type here names itself in field 1 or 3 of its bytes). */
const namesIn = (r: RawResponse, candidates: readonly string[]) =>
  candidates.filter((n) => r.resources.some((x) => x.value.includes(Buffer.from(n))));

describe('read access on the xDS port', { skip }, () => {
  let ca: TestCa;
  let canopy: CanopyProcess;
  let tenantA: Pem;
  let tenantB: Pem;
  const closers: (() => void)[] = [];

  before(async () => {
    assert.ok(!missing, 'openssl is required under CI');
    ca = makeTestCa();
    const server = ca.server();
    tenantA = ca.client('spiffe://tenant-a.test/ns/a/sa/web');
    tenantB = ca.client('spiffe://tenant-b.test/ns/b/sa/web');
    const rules = path.join(ca.dir, 'rules.yaml');
    writeFileSync(rules, RULES);
    const tokenFile = path.join(ca.dir, 'token');
    writeFileSync(tokenFile, TOKEN);
    canopy = await startCanopyProcess(
      {
        services: SERVICES.map((name, i) => ({
          name,
          vip: `10.96.0.${i + 1}`,
          port: 8080,
          endpoints: [{ address: `10.0.${i}.1`, port: 80, locality: { region: 'r1', zone: 'z1', subzone: 's1' } }],
        })),
      },
      [
        ...['--tls-cert', server.certFile, '--tls-key', server.keyFile, '--client-ca', ca.caFile],
        ...['--xds-read-rules', rules, '--admin-token-file', tokenFile],
      ],
    );
  });
  after(async () => {
    for (const c of closers) c();
    await canopy?.stop();
    if (ca) rmSync(ca.dir, { recursive: true, force: true });
  });

  const creds = (pem?: Pem) => grpc.credentials.createSsl(ca.caCert, pem?.key ?? null, pem?.cert ?? null);
  const sotw = (pem: Pem) => {
    const s = new RawAdsStream(canopy.xdsUri, { 'grpc.use_local_subchannel_pool': 1 }, false, creds(pem));
    closers.push(() => s.close());
    return s;
  };
  const delta = (pem: Pem) => {
    const s = new RawDeltaStream(canopy.xdsUri, { 'grpc.use_local_subchannel_pool': 1 }, creds(pem));
    closers.push(() => s.close());
    return s;
  };

  it('SotW: a tenant sees its services and the shared one in every type, wildcards included', async () => {
    const a = sotw(tenantA);
    a.send({ node: { id: 'web', locality }, type_url: CDS, resource_names: [] });
    assert.deepEqual(namesIn(await a.next(5000), SERVICES).sort(), ['a-db', 'a-web', 'shared']);
    a.send({ type_url: LDS, resource_names: [] });
    assert.deepEqual(namesIn(await a.next(5000), SERVICES).sort(), ['a-db', 'a-web', 'shared']);
    for (const type of [RDS, EDS, TREE]) {
      a.send({ type_url: type, resource_names: ['a-web', 'b-web'] });
      const r = await a.next(5000);
      assert.equal(r.type_url, type);
      assert.deepEqual(namesIn(r, SERVICES), ['a-web'], type);
    }
    // Asked for the other tenant's service alone: nothing is sent.
    a.send({ type_url: EDS, resource_names: ['b-web'] });
    const r = await a.maybeNext(1000);
    assert.ok(r === undefined || r.resources.length === 0, 'no b-web CLA');

    const b = sotw(tenantB);
    b.send({ node: { id: 'web', locality }, type_url: EDS, resource_names: ['a-web', 'b-web', 'shared'] });
    assert.deepEqual(namesIn(await b.next(5000), SERVICES).sort(), ['b-web', 'shared']);
  });

  it('delta: the other tenant’s resources are removed_resources, LEDS collections included', async () => {
    const envoy = (id: string) => ({ id, locality, user_agent_name: 'envoy' });
    const b = delta(ca.client('spiffe://tenant-b.test/ns/b/b-envoy'));
    b.send({ node: envoy('b-envoy'), type_url: EDS, resource_names_subscribe: ['b-web'] });
    const cla = await b.next(5000);
    assert.ok(
      cla.resources[0]?.resource?.value.includes(Buffer.from(glob('b-web'))),
      'the CLA names its LEDS collection',
    );
    b.send({ type_url: LEDS, resource_names_subscribe: [glob('b-web')] });
    const own = await b.next(5000);
    assert.equal(own.type_url, LEDS);
    assert.equal(own.resources.length, 1, 'tenant B gets its collection’s member');

    const a = delta(ca.client('spiffe://tenant-a.test/ns/a/a-envoy'));
    a.send({ node: envoy('a-envoy'), type_url: EDS, resource_names_subscribe: ['a-web', 'b-web'] });
    const eds = await a.next(5000);
    assert.deepEqual(
      eds.resources.map((x) => x.name),
      ['a-web'],
    );
    assert.deepEqual(eds.removed_resources, ['b-web']);
    a.send({ type_url: CDS, resource_names_subscribe: ['*'] });
    const cds = await a.next(5000);
    assert.deepEqual(cds.resources.map((x) => x.name).sort(), ['a-db', 'a-web', 'shared']);
    a.send({ type_url: LEDS, resource_names_subscribe: [glob('b-web'), glob('a-web')] });
    const leds = await a.next(5000);
    assert.ok(
      leds.resources.every((x) => x.name.includes('/a-web/')),
      JSON.stringify(leds.resources.map((x) => x.name)),
    );
    assert.equal(leds.resources.length, 1);
    assert.ok(!leds.resources.some((x) => x.name.includes('/b-web/')));
  });

  it('refuses a certificate without a SPIFFE ID, whether or not the node sends an id', async () => {
    const noSpiffe = ca.client('https://tenant-a.test/not-spiffe');
    for (const node of [{ id: 'web' }, undefined]) {
      const s = sotw(noSpiffe);
      s.send({ ...(node ? { node } : {}), type_url: EDS, resource_names: ['a-web'] });
      assert.equal(await s.maybeNext(1500), undefined);
      const st = await s.status;
      assert.equal(st.code, grpc.status.PERMISSION_DENIED);
      assert.match(st.details, /no spiffe:\/\/ URI SAN/);
    }
  });

  it('refuses to start on a bad rule file, naming each field, or on rules without --client-ca', async () => {
    const bad = path.join(ca.dir, 'bad-rules.yaml');
    writeFileSync(bad, 'rules:\n  - spiffe: spiffe://*.test/ns\n    services: [a b]\n    csd: true\n');
    const server = ca.server();
    const tls = ['--tls-cert', server.certFile, '--tls-key', server.keyFile];
    await assert.rejects(
      startCanopyProcess({ services: [] }, [...tls, '--client-ca', ca.caFile, '--xds-read-rules', bad]),
      (err: Error) =>
        /rules\[0\]\.spiffe: must be spiffe:\/\/TRUST-DOMAIN\/PATH/.test(err.message) &&
        /rules\[0\]\.services\[0\]: must be a service name pattern/.test(err.message) &&
        /rules\[0\]\.csd: unknown field/.test(err.message),
    );
    await assert.rejects(
      startCanopyProcess({ services: [] }, [...tls, '--xds-read-rules', bad]),
      /--xds-read-rules needs --client-ca/,
    );
  });

  it('CSDS: refused without the admin token, served with it or to an identity allowed to read it', async () => {
    const fetch = (pem: Pem, token?: string) =>
      new Promise<{ code: number; bytes?: Buffer }>((resolve) => {
        const client = new grpc.Client(canopy.xdsUri, creds(pem), { 'grpc.use_local_subchannel_pool': 1 });
        closers.push(() => client.close());
        const md = new grpc.Metadata();
        if (token) md.set('authorization', `Bearer ${token}`);
        client.makeUnaryRequest(
          CSDS_FETCH,
          (b: Buffer) => b,
          (b: Buffer) => b,
          Buffer.alloc(0),
          md,
          (err, bytes) => resolve(err ? { code: err.code } : { code: grpc.status.OK, ...(bytes ? { bytes } : {}) }),
        );
      });
    assert.equal((await fetch(tenantA)).code, grpc.status.UNAUTHENTICATED);
    assert.equal((await fetch(tenantA, 'not-the-admin-token-at-all')).code, grpc.status.PERMISSION_DENIED);
    const withToken = await fetch(tenantA, TOKEN);
    assert.equal(withToken.code, grpc.status.OK);
    assert.ok(withToken.bytes?.includes(Buffer.from('b-envoy')), 'CSDS lists the connected nodes');
    const operator = await fetch(ca.client('spiffe://ops.test/csds-reader'));
    assert.equal(operator.code, grpc.status.OK);
  });
});
