/**
 * A fleet re-syncing after a flip costs no encode: the nonce is made from a
 * response's content (sessions/wire-nonce.ts), so streams connecting after a
 * push, at the state it brought, are sent the push's very bytes, nonce
 * included, SotW and delta, from the main thread or from worker threads.
 * Real gRPC streams on loopback, each on a connection of its own.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { pino } from 'pino';
import { parseConfig } from '../server/src/domain/spec.js';
import { startCanopy, type Canopy } from '../server/src/main.js';
import { sharedEncodeCount } from '../server/src/sessions/shared-responses.js';
import { ECHO_REGIONS, echoMesh } from './support/echo-mesh.js';
import { RawAdsStream, RawDeltaStream, type RawDeltaResponse, type RawResponse } from './support/raw-ads.js';

const EDS = 'type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment';
const STREAMS = 12;
const REGIONS = ECHO_REGIONS;

const config = parseConfig(echoMesh());

const start = (xdsWorkers: number): Promise<Canopy> => {
  assert.ok(config.ok);
  return startCanopy({
    config: config.value,
    host: '127.0.0.1',
    xdsPort: 0,
    adminPort: 0,
    debounceMs: 20,
    xdsWorkers,
    logger: pino({ level: 'silent' }),
  });
};

/** One protocol's client: open a stream in a region, read its next response, ACK a response. */
interface Client<R extends { nonce: string }> {
  open(canopy: Canopy, i: number): { next(ms: number): Promise<R>; ack(r: R): void; close(): void };
  body(r: R): string;
}

const node = (i: number) => {
  const region = REGIONS[i % REGIONS.length]!;
  return { id: `${region}-${i}`, locality: { region } };
};
// Each stream on a connection of its own (no shared subchannel pool), so they spread over the workers.
const own = { 'grpc.use_local_subchannel_pool': 1 };

const sotw: Client<RawResponse> = {
  open(canopy, i) {
    const s = new RawAdsStream(canopy.xdsAddress, own);
    s.send({ node: node(i), type_url: EDS, resource_names: ['echo'] });
    return {
      next: (ms) => s.next(ms),
      ack: (r) =>
        s.send({ type_url: EDS, resource_names: ['echo'], version_info: r.version_info, response_nonce: r.nonce }),
      close: () => s.close(),
    };
  },
  body: (r) => `${r.version_info} ${r.nonce} ${r.resources[0]!.value.toString('base64')}`,
};

const delta: Client<RawDeltaResponse> = {
  open(canopy, i) {
    const s = new RawDeltaStream(canopy.xdsAddress, own);
    s.send({ node: node(i), type_url: EDS, resource_names_subscribe: ['echo'] });
    return {
      next: (ms) => s.next(ms),
      ack: (r) => s.send({ type_url: EDS, response_nonce: r.nonce }),
      close: () => s.close(),
    };
  },
  body: (r) => `${r.system_version_info} ${r.nonce} ${r.resources[0]!.resource!.value.toString('base64')}`,
};

async function flip(canopy: Canopy, health: string): Promise<void> {
  const res = await fetch(
    `http://${canopy.adminAddress}/api/v1/services/echo/endpoints/${encodeURIComponent('10.0.1.2:80')}`,
    { method: 'PATCH', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ health }) },
  );
  assert.equal(res.status, 200, await res.text());
}

/** Sync, flip, then as many new streams at the new state: the encodes of each phase. */
async function resync<R extends { nonce: string }>(canopy: Canopy, client: Client<R>, health: string) {
  const before = sharedEncodeCount();
  const old = Array.from({ length: STREAMS }, (_, i) => client.open(canopy, i));
  const fresh: typeof old = [];
  try {
    const first = await Promise.all(old.map((s) => s.next(10_000)));
    old.forEach((s, i) => s.ack(first[i]!));
    const synced = sharedEncodeCount();
    await flip(canopy, health);
    const pushed = await Promise.all(old.map((s) => s.next(10_000)));
    old.forEach((s, i) => s.ack(pushed[i]!));
    const flipped = sharedEncodeCount();
    for (let i = 0; i < STREAMS; i++) fresh.push(client.open(canopy, i));
    const again = await Promise.all(fresh.map((s) => s.next(10_000)));
    const encodes = { sync: synced - before, push: flipped - synced, resync: sharedEncodeCount() - flipped };
    return { first, pushed, again, encodes };
  } finally {
    for (const s of [...old, ...fresh]) s.close();
  }
}

for (const workers of [1, 2]) {
  describe(`re-sync after a push, ${workers === 1 ? 'main thread' : `${workers} xDS workers`}`, () => {
    let canopy: Canopy;
    before(async () => {
      canopy = await start(workers);
    });
    after(() => canopy?.stop());

    const cases = [
      ['SotW', sotw, 'unhealthy'],
      ['delta', delta, 'healthy'],
    ] as const;
    for (const [name, client, health] of cases) {
      it(`${name}: new streams at the pushed state get the push's bytes, with no new encode`, async (t) => {
        const { first, pushed, again, encodes } = await resync<RawResponse & RawDeltaResponse>(
          canopy,
          client as Client<RawResponse & RawDeltaResponse>,
          health,
        );
        t.diagnostic(`encodes: ${JSON.stringify(encodes)}`);
        const body = client.body as (r: RawResponse & RawDeltaResponse) => string;
        pushed.forEach((r, i) => assert.notEqual(body(r), body(first[i]!), 'every stream got the change'));
        assert.equal(encodes.push, REGIONS.length, 'the push: one encode per region');
        again.forEach((r, i) => assert.equal(body(r), body(pushed[i]!), "the push's response, nonce included"));
        assert.equal(encodes.resync, 0, 'the re-sync: no new encode');
      });
    }
  });
}
