/**
 * The state-of-the-world protocol over a raw ADS stream against a real
 * server on loopback: ACKs get no reply, stale nonces are ignored, a NACKed
 * version is not re-sent, and identical content keeps its version.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { pino } from 'pino';
import { startCanopy, type Canopy } from '../server/src/main.js';
import type { ServiceSpec } from '../server/src/domain/service.js';
import type { ClientStatus, TypeStatus } from '../server/src/sessions/client-status.js';
import { RawAdsStream } from './support/raw-ads.js';

const CDS = 'type.googleapis.com/envoy.config.cluster.v3.Cluster';
const EDS = 'type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment';
const QUIET_MS = 400;

function spec(health: 'healthy' | 'unhealthy' = 'healthy', extra = 0): ServiceSpec {
  const endpoints = [
    { address: '127.0.0.2', port: 9001, locality: { region: 'r1', zone: 'z1', subzone: 's1' }, health },
    {
      address: '127.0.0.3',
      port: 9001,
      locality: { region: 'r1', zone: 'z2', subzone: 's1' },
      health: 'healthy' as const,
    },
    ...Array.from({ length: extra }, (_, i) => ({
      address: `127.0.1.${i + 1}`,
      port: 9001,
      locality: { region: 'r2', zone: 'z1', subzone: 's1' },
      health: 'healthy' as const,
    })),
  ];
  return {
    name: 'echo',
    loadBalancing: {
      mode: 'failover',
      routingPreference: ['region', 'zone', 'subzone'],
      crossNetworkFailover: true,
      overprovisioningFactor: 140,
    },
    endpoints: endpoints.map((e) => ({ ...e, network: '', node: '', cluster: '', labels: {}, weight: 1 })),
  };
}

const node = { id: 'raw-1', cluster: 'test', locality: { region: 'r1', zone: 'z1', sub_zone: 's1' } };

describe('ADS protocol over a raw stream', () => {
  let canopy: Canopy;
  let ads: RawAdsStream;

  before(async () => {
    canopy = await startCanopy({
      config: { services: [spec()], server: {} },
      host: '127.0.0.1',
      xdsPort: 0,
      adminPort: 0,
      debounceMs: 20,
      logger: pino({ level: 'silent' }),
    });
    ads = new RawAdsStream(canopy.xdsAddress);
  });
  after(async () => {
    ads?.close();
    await canopy?.stop();
  });

  let cds: { version: string; nonce: string };
  let eds: { version: string; nonce: string };

  it('answers a wildcard CDS request with full state, and an ACK gets no reply', async () => {
    ads.send({ node, type_url: CDS, resource_names: [] });
    const r = await ads.next();
    assert.equal(r.type_url, CDS);
    assert.equal(r.resources.length, 1);
    assert.ok(r.version_info && r.nonce);
    cds = { version: r.version_info, nonce: r.nonce };
    ads.send({ type_url: CDS, version_info: r.version_info, response_nonce: r.nonce, resource_names: [] });
    assert.equal(await ads.maybeNext(QUIET_MS), undefined, 'an ACK must not be answered');
  });

  it('answers a named EDS subscription', async () => {
    ads.send({ type_url: EDS, resource_names: ['echo'] });
    const r = await ads.next();
    assert.equal(r.type_url, EDS);
    assert.deepEqual(
      r.resources.map((x) => x.type_url),
      [EDS],
    );
    eds = { version: r.version_info, nonce: r.nonce };
    ads.send({ type_url: EDS, version_info: r.version_info, response_nonce: r.nonce, resource_names: ['echo'] });
    assert.equal(await ads.maybeNext(QUIET_MS), undefined);
  });

  it('ignores a request with a stale nonce, subscription change included', async () => {
    ads.send({
      type_url: EDS,
      version_info: eds.version,
      response_nonce: 'not-a-nonce-we-sent',
      resource_names: ['echo', 'other'],
    });
    assert.equal(await ads.maybeNext(QUIET_MS), undefined, 'a stale-nonce request must be ignored');
    const edsStatus = await edsStatusOf(canopy);
    assert.deepEqual(edsStatus.subscribed, ['echo']);
  });

  it('identical content keeps its version and pushes nothing', async () => {
    await canopy.store.put(spec(), { owner: 'api' });
    await canopy.store.put({ ...spec(), endpoints: [...spec().endpoints].reverse() }, { owner: 'api' });
    assert.equal(await ads.maybeNext(QUIET_MS), undefined, 'no push for unchanged content');
  });

  it('a change pushes a new version; a NACK of it is recorded and not re-sent', async () => {
    await canopy.store.put(spec('unhealthy'), { owner: 'api' });
    const pushed = await ads.next();
    assert.equal(pushed.type_url, EDS, 'only EDS changed: CDS content is the same');
    assert.notEqual(pushed.version_info, eds.version);
    ads.send({
      type_url: EDS,
      version_info: eds.version,
      response_nonce: pushed.nonce,
      resource_names: ['echo'],
      error_detail: { code: 3, message: 'test rejects this CLA' },
    });
    assert.equal(await ads.maybeNext(QUIET_MS), undefined, 'a NACKed version must not be re-sent');
    const edsStatus = await edsStatusOf(canopy);
    assert.equal(edsStatus.lastNack?.detail, 'test rejects this CLA');
    assert.equal(edsStatus.lastNack?.version, pushed.version_info);
    assert.equal(edsStatus.versionAcked, eds.version, 'the last good version stays acked');

    // The next change is a new version and is sent.
    await canopy.store.put(spec('healthy', 1), { owner: 'api' });
    const next = await ads.next();
    assert.equal(next.type_url, EDS);
    assert.notEqual(next.version_info, pushed.version_info);
    ads.send({ type_url: EDS, version_info: next.version_info, response_nonce: next.nonce, resource_names: ['echo'] });
    assert.equal(await ads.maybeNext(QUIET_MS), undefined);
    assert.ok(cds.version);
  });

  it('returning to earlier content returns to its version', async () => {
    await canopy.store.put(spec(), { owner: 'api' });
    const r = await ads.next();
    assert.equal(r.version_info, eds.version, 'same content, same version');
  });
});

/** The EDS row of /debug/clients for the one connected client. */
async function edsStatusOf(canopy: Canopy): Promise<TypeStatus> {
  const res = await fetch(`http://${canopy.adminAddress}/debug/clients`);
  const body = (await res.json()) as { clients: ClientStatus[] };
  const row = body.clients[0]?.types.find((t) => t.typeUrl === EDS);
  assert.ok(row, 'the client has an EDS subscription');
  return row;
}
