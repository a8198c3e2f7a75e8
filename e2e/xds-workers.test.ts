/**
 * xDS served from worker threads (`xdsWorkers`, transport/xds-workers.ts): clients on their own
 * connections land on every worker, each converges on connect and after a change, and a push still
 * encodes each distinct response once, whatever the workers its streams are on. A port another server
 * holds is refused. With `xdsWorkers: 1` the main thread serves alone.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { pino } from 'pino';
import { parseConfig } from '../server/src/domain/spec.js';
import { startCanopy, type Canopy } from '../server/src/main.js';
import { sharedEncodeCount } from '../server/src/sessions/shared-responses.js';
import { ECHO_REGIONS, echoMesh } from './support/echo-mesh.js';
import { RawAdsStream, type RawResponse } from './support/raw-ads.js';

const EDS = 'type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment';
const STREAMS = 24;
const REGIONS = ECHO_REGIONS;

const config = parseConfig(echoMesh());

const start = (xdsWorkers: number, xdsPort = 0): Promise<Canopy> => {
  assert.ok(config.ok);
  return startCanopy({
    config: config.value,
    host: '127.0.0.1',
    xdsPort,
    adminPort: 0,
    debounceMs: 20,
    xdsWorkers,
    logger: pino({ level: 'silent' }),
  });
};

/** Streams each on a connection of its own (no shared subchannel pool), half in each region. */
function streams(canopy: Canopy) {
  return Array.from({ length: STREAMS }, (_, i) => {
    const region = REGIONS[i % REGIONS.length]!;
    const ads = new RawAdsStream(canopy.xdsAddress, { 'grpc.use_local_subchannel_pool': 1 });
    ads.send({ node: { id: `${region}-${i}`, locality: { region } }, type_url: EDS, resource_names: ['echo'] });
    return ads;
  });
}

const ack = (ads: RawAdsStream, r: RawResponse) =>
  ads.send({ type_url: EDS, resource_names: ['echo'], version_info: r.version_info, response_nonce: r.nonce });

describe('xDS on worker threads', () => {
  let canopy: Canopy;
  before(async () => {
    canopy = await start(2);
  });
  after(() => canopy?.stop());

  it('spreads the connections over the workers and encodes each distinct response once per push', async () => {
    const encodes0 = sharedEncodeCount();
    const all = streams(canopy);
    try {
      const first = await Promise.all(all.map((s) => s.next(10_000)));
      all.forEach((s, i) => ack(s, first[i]!));
      const body = (r: RawResponse) => r.resources[0]!.value.toString('base64');
      assert.equal(new Set(first.map(body)).size, 2, 'one CLA per region');
      assert.equal(sharedEncodeCount() - encodes0, 2, 'initial answers: one encode per region');
      const threads = canopy.xdsThreads();
      assert.equal(threads.length, 2);
      assert.equal(
        threads.reduce((a, b) => a + b, 0),
        STREAMS,
      );
      // 24 connections hashed over two sockets: all on one worker has a chance of 2 in 2^24.
      assert.ok(
        threads.every((n) => n > 0),
        `streams per worker: ${threads.join(', ')}`,
      );

      const res = await fetch(
        `http://${canopy.adminAddress}/api/v1/services/echo/endpoints/${encodeURIComponent('10.0.1.2:80')}`,
        { method: 'PATCH', headers: { 'content-type': 'application/json' }, body: '{"health":"unhealthy"}' },
      );
      assert.equal(res.status, 200, await res.text());
      const pushed = await Promise.all(all.map((s) => s.next(10_000)));
      all.forEach((s, i) => ack(s, pushed[i]!));
      pushed.forEach((r, i) => assert.notEqual(body(r), body(first[i]!), 'every stream got the change'));
      assert.equal(sharedEncodeCount() - encodes0, 4, 'the push: one encode per region');
    } finally {
      for (const s of all) s.close();
    }
  });

  it('refuses a port another server holds, though its workers listen with reusePort', async () => {
    const port = Number(canopy.xdsAddress.slice(canopy.xdsAddress.lastIndexOf(':') + 1));
    await assert.rejects(start(2, port), (err: Error & { code?: string }) => {
      assert.equal(err.code, 'CANOPY_XDS_WORKER_FAILED');
      assert.match(err.message, /is taken/);
      return true;
    });
  });

  it('serves from the main thread alone with one worker', async () => {
    const single = await start(1);
    try {
      const [s] = streams(single);
      const r = await s!.next(10_000);
      assert.equal(r.type_url, EDS);
      assert.deepEqual(single.xdsThreads(), []);
      s!.close();
    } finally {
      await single.stop();
    }
  });
});
