/**
 * One unauthenticated connection cannot make the server hold more than 64 MB of subscriptions, whatever
 * heap limit the server runs with: the per-connection byte limit is derived from the heap but capped
 * (transport/subscription-budget.ts). A hoarder opens 10 SotW streams on one connection and asks, on
 * each, for 10,000 names of 1,000 characters for each of four types (the 400 MB request that made a
 * large-heap server hold 140 MB): each stream is refused with RESOURCE_EXHAUSTED naming the limit and its
 * flag when it passes it, and the heap, measured after a full collection at every step, grows by less
 * than 64 MB (it includes the client's side: an upper bound on the server's).
 * The server runs in this process (its limits from this process's heap, as `canopy serve` derives
 * them), so that a full collection can be forced before each reading; the client is a real gRPC
 * client on loopback.
 */
import assert from 'node:assert/strict';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { pino } from 'pino';
import { startCanopy, type Canopy } from '../server/src/main.js';
import { RawAdsStream } from './support/raw-ads.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

const TYPES = ['Cluster', 'ClusterLoadAssignment', 'Listener', 'RouteConfiguration'].map(
  (t) =>
    `type.googleapis.com/envoy.config.${t === 'Cluster' ? 'cluster' : t === 'Listener' ? 'listener' : t === 'RouteConfiguration' ? 'route' : 'endpoint'}.v3.${t}`,
);
const STREAMS = 10;
const NAMES = 10_000;
const MB = 1_000_000;

/** The heap after a full collection: where subscription state (names as strings, their sets) lives. */
const heldBytes = (): number => {
  gc();
  return process.memoryUsage().heapUsed;
};

describe("one connection's share of the server's memory", () => {
  let canopy: Canopy;
  const streams: RawAdsStream[] = [];

  before(async () => {
    canopy = await startCanopy({
      config: { services: [], server: {} },
      host: '127.0.0.1',
      xdsPort: 0,
      adminPort: 0,
      logger: pino({ level: 'silent' }),
    });
  });
  after(async () => {
    for (const s of streams) s.close();
    await canopy?.stop();
  });

  const gauge = async (name: string): Promise<number> => {
    const text = await (await fetch(`http://${canopy.adminAddress}/metrics`)).text();
    const line = text.split('\n').find((l) => l.startsWith(`${name} `));
    return Number(line?.slice(name.length + 1));
  };

  it('refuses a hoarding connection with a clear status and holds < 64 MB for it', async () => {
    // The connection and the server's paths warmed by a small stream first: what is measured is what the names hold.
    const warm = new RawAdsStream(canopy.xdsAddress, { 'canopy.test.connection': 'hoarder' });
    streams.push(warm);
    warm.send({ node: { id: 'hoarder-warm' }, type_url: TYPES[0]!, resource_names: ['warm'] });
    await warm.maybeNext(500);
    const base = heldBytes();
    let peak = 0;
    const statuses: grpc.StatusObject[] = [];
    for (let i = 0; i < STREAMS; i++) {
      const s = new RawAdsStream(canopy.xdsAddress, {
        'canopy.test.connection': 'hoarder',
        'grpc.max_send_message_length': -1,
      });
      streams.push(s);
      const end: { status?: grpc.StatusObject } = {};
      void s.status.then((st) => (end.status = st));
      const ended = () => end.status;
      for (const [t, typeUrl] of TYPES.entries()) {
        if (ended()) break;
        const names = Array.from({ length: NAMES }, (_, k) => `h${i}-${t}-${k}-`.padEnd(1000, 'x'));
        const before = await gauge('canopy_xds_subscription_bytes');
        await s.sendAndFlush({
          ...(t === 0 ? { node: { id: `hoarder-${i}` } } : {}),
          type_url: typeUrl,
          resource_names: names,
        });
        // Counted (the gauge grew) or refused (the stream ended): either way the request was read.
        for (let w = 0; w < 400 && !ended() && (await gauge('canopy_xds_subscription_bytes')) === before; w++)
          await new Promise((r) => setTimeout(r, 25));
        peak = Math.max(peak, heldBytes() - base);
      }
      // A refusal gives the stream's share back at once; its status may reach the client just after.
      const st =
        ended() ??
        (await Promise.race([s.status, new Promise<undefined>((r) => setTimeout(() => r(undefined), 5000))]));
      if (st) statuses.push(st);
    }
    // Every stream reaches the limit (3 types of 10,000 names fit in 32 MiB, 4 do not) and is ended.
    console.log(`peak heap growth ${(peak / MB).toFixed(1)} MB; refused ${statuses.length} of ${STREAMS} streams`);
    assert.equal(statuses.length, STREAMS, 'each stream is refused when it passes the limit');
    for (const st of statuses) {
      assert.equal(st.code, grpc.status.RESOURCE_EXHAUSTED);
      assert.match(st.details, /MiB per connection \(--xds-max-bytes-per-connection\)/);
    }
    assert.ok(peak < 64 * MB, `the server held ${(peak / MB).toFixed(1)} MB for one connection`);
  });
});
