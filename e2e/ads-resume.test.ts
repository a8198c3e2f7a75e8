/**
 * A client that reconnects, to the same replica or another one, with the
 * versions it holds is sent nothing until something changes: versions are
 * content hashes, identical on every replica. Two servers with the same
 * services stand for two replicas; SotW here, delta in ads-delta.test.ts.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { pino } from 'pino';
import type { ServiceSpec } from '../server/src/domain/service.js';
import { startCanopy, type Canopy } from '../server/src/main.js';
import { RawAdsStream } from './support/raw-ads.js';

const CDS = 'type.googleapis.com/envoy.config.cluster.v3.Cluster';
const EDS = 'type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment';
const QUIET_MS = 500;

function echo(health: 'healthy' | 'unhealthy'): ServiceSpec {
  return {
    name: 'echo',
    loadBalancing: {
      mode: 'failover',
      routingPreference: ['region', 'zone', 'subzone'],
      crossNetworkFailover: true,
      overprovisioningFactor: 140,
    },
    endpoints: [
      {
        address: '127.0.0.2',
        port: 9001,
        locality: { region: 'r1', zone: 'z1', subzone: 's1' },
        health: health as 'healthy' | 'unhealthy',
      },
      {
        address: '127.0.0.3',
        port: 9001,
        locality: { region: 'r1', zone: 'z2', subzone: 's1' },
        health: 'healthy' as const,
      },
    ].map((e) => ({ ...e, network: '', node: '', cluster: '', labels: {}, weight: 1 })),
  };
}

const node = { id: 'resume-1', cluster: 'test', locality: { region: 'r1', zone: 'z1', sub_zone: 's1' } };

function replica(): Promise<Canopy> {
  return startCanopy({
    config: { services: [echo('healthy')], server: {} },
    host: '127.0.0.1',
    xdsPort: 0,
    adminPort: 0,
    debounceMs: 20,
    logger: pino({ level: 'silent' }),
  });
}

describe('SotW: reconnecting with the versions held', () => {
  let a: Canopy;
  let b: Canopy;
  const streams: RawAdsStream[] = [];
  before(async () => {
    [a, b] = await Promise.all([replica(), replica()]);
  });
  after(async () => {
    for (const s of streams) s.close();
    await Promise.all([a?.stop(), b?.stop()]);
  });
  const open = (c: Canopy) => {
    const s = new RawAdsStream(c.xdsAddress);
    streams.push(s);
    return s;
  };

  it('another replica sends nothing the client already holds, then only what changes', async () => {
    const first = open(a);
    first.send({ node, type_url: CDS, resource_names: [] });
    const cds = await first.next();
    first.send({ type_url: CDS, version_info: cds.version_info, response_nonce: cds.nonce, resource_names: [] });
    first.send({ type_url: EDS, resource_names: ['echo'] });
    const eds = await first.next();
    first.send({ type_url: EDS, version_info: eds.version_info, response_nonce: eds.nonce, resource_names: ['echo'] });
    first.close();

    const second = open(b);
    second.send({ node, type_url: CDS, version_info: cds.version_info, resource_names: [] });
    second.send({ type_url: EDS, version_info: eds.version_info, resource_names: ['echo'] });
    assert.equal(await second.maybeNext(QUIET_MS), undefined, 'nothing re-sent on reconnect');

    // A change on that replica reaches the resumed stream as usual.
    await b.feed.caughtUp(await b.store.put(echo('unhealthy'), { owner: 'api' }));
    const pushed = await second.next();
    assert.equal(pushed.type_url, EDS);
    assert.notEqual(pushed.version_info, eds.version_info);
  });

  it('a client holding an older version is sent the current one', async () => {
    const s = open(a);
    s.send({
      node: { ...node, id: 'resume-2' },
      type_url: EDS,
      version_info: 'stale-version',
      resource_names: ['echo'],
    });
    const r = await s.next();
    assert.equal(r.resources.length, 1);
    assert.notEqual(r.version_info, 'stale-version');
  });
});
