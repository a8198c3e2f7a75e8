/**
 * The incremental protocol (DeltaAggregatedResources) over real gRPC streams
 * against a real server on loopback, one test per rule of Envoy's xDS
 * protocol page. Services are changed through the admin REST API, as an
 * operator would; each test uses its own service names and its own stream.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { pino } from 'pino';
import { parseConfig } from '../server/src/domain/spec.js';
import { startCanopy, type Canopy } from '../server/src/main.js';
import type { ClientStatus, TypeStatus } from '../server/src/sessions/client-status.js';
import { RawAdsStream, RawDeltaStream, type RawDeltaResponse } from './support/raw-ads.js';
import { decodeEnvoy } from './support/raw-grpc-frames.js';

const LDS = 'type.googleapis.com/envoy.config.listener.v3.Listener';
const CDS = 'type.googleapis.com/envoy.config.cluster.v3.Cluster';
const EDS = 'type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment';
const QUIET_MS = 400;

const node = (id: string) => ({ id, cluster: 'test', locality: { region: 'r1', zone: 'z1', sub_zone: 's1' } });

/** A service body for PUT /api/v1/services/:name; `port` varies the endpoints' content. */
function serviceBody(port = 9001) {
  return {
    loadBalancing: { mode: 'failover' },
    endpoints: [
      { address: '127.0.0.2', port, locality: { region: 'r1', zone: 'z1', subzone: 's1' } },
      { address: '127.0.0.3', port, locality: { region: 'r1', zone: 'z2', subzone: 's1' } },
    ],
  };
}

async function put(canopy: Canopy, name: string, port = 9001): Promise<void> {
  const res = await fetch(`http://${canopy.adminAddress}/api/v1/services/${name}`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(serviceBody(port)),
  });
  assert.ok(res.status < 300, await res.text());
}

async function remove(canopy: Canopy, name: string): Promise<void> {
  const res = await fetch(`http://${canopy.adminAddress}/api/v1/services/${name}`, { method: 'DELETE' });
  assert.ok(res.status < 300, await res.text());
}

async function statusOf(canopy: Canopy, nodeId: string, typeUrl: string): Promise<TypeStatus> {
  const res = await fetch(`http://${canopy.adminAddress}/debug/clients`);
  const body = (await res.json()) as { clients: ClientStatus[] };
  const row = body.clients.find((c) => c.nodeId === nodeId)?.types.find((t) => t.typeUrl === typeUrl);
  assert.ok(row, `${nodeId} has a ${typeUrl} subscription`);
  return row;
}

/** Checks what every delta response must hold, and returns name → version of its resources. */
function versions(r: RawDeltaResponse, typeUrl: string): Map<string, string> {
  assert.equal(r.type_url, typeUrl);
  assert.ok(r.nonce, 'nonce set');
  const out = new Map<string, string>();
  for (const res of r.resources) {
    assert.equal(res.resource?.type_url, typeUrl, 'each Any carries the response type');
    assert.ok(res.version, 'each resource has a version');
    out.set(res.name, res.version);
  }
  return out;
}

/** The port of a CLA's first endpoint. */
function portOf(cla: Buffer): number | undefined {
  type Cla = { endpoints: { lb_endpoints: { endpoint: { address: { socket_address: { port_value: number } } } }[] }[] };
  return decodeEnvoy<Cla>('envoy.config.endpoint.v3.ClusterLoadAssignment', cla).endpoints[0]?.lb_endpoints[0]?.endpoint
    .address.socket_address.port_value;
}

function ack(stream: RawDeltaStream, r: RawDeltaResponse, more: { subscribe?: string[]; unsubscribe?: string[] } = {}) {
  stream.send({
    type_url: r.type_url,
    response_nonce: r.nonce,
    ...(more.subscribe ? { resource_names_subscribe: more.subscribe } : {}),
    ...(more.unsubscribe ? { resource_names_unsubscribe: more.unsubscribe } : {}),
  });
}

describe('delta ADS over a real stream', () => {
  let canopy: Canopy;
  const streams: (RawDeltaStream | RawAdsStream)[] = [];
  const open = (): RawDeltaStream => {
    const s = new RawDeltaStream(canopy.xdsAddress);
    streams.push(s);
    return s;
  };

  before(async () => {
    canopy = await startCanopy({
      config: { services: [], server: {} },
      host: '127.0.0.1',
      xdsPort: 0,
      adminPort: 0,
      debounceMs: 20,
      logger: pino({ level: 'silent' }),
    });
  });
  after(async () => {
    for (const s of streams) s.close();
    await canopy?.stop();
  });

  it('versions each resource by the content hash SotW uses: equal across protocols, streams and replicas', async () => {
    await put(canopy, 'v-a');
    const d1 = open();
    d1.send({ node: node('v-1'), type_url: EDS, resource_names_subscribe: ['v-a'] });
    const r1 = await d1.next();
    const version = versions(r1, EDS).get('v-a');
    assert.ok(version);
    // Another delta stream at the same locality: the same version.
    const d2 = open();
    d2.send({ node: node('v-2'), type_url: EDS, resource_names_subscribe: ['v-a'] });
    assert.equal(versions(await d2.next(), EDS).get('v-a'), version);
    // SotW over the same subscription: its version_info is delta's system_version_info.
    const sotw = new RawAdsStream(canopy.xdsAddress);
    streams.push(sotw);
    sotw.send({ node: node('v-3'), type_url: EDS, resource_names: ['v-a'] });
    assert.equal((await sotw.next()).version_info, r1.system_version_info);
    // A replica with the same services: the same per-resource version.
    const replica = await startCanopy({
      config: { services: [], server: {} },
      host: '127.0.0.1',
      xdsPort: 0,
      adminPort: 0,
      logger: pino({ level: 'silent' }),
    });
    try {
      await put(replica, 'v-a');
      const d3 = new RawDeltaStream(replica.xdsAddress);
      streams.push(d3);
      d3.send({ node: node('v-4'), type_url: EDS, resource_names_subscribe: ['v-a'] });
      assert.equal(versions(await d3.next(), EDS).get('v-a'), version);
    } finally {
      await replica.stop();
    }
  });

  it('applies subscribe and unsubscribe carried by any request', async () => {
    await put(canopy, 's-a');
    await put(canopy, 's-b');
    const d = open();
    d.send({ node: node('s-1'), type_url: EDS, resource_names_subscribe: ['s-a'] });
    const first = await d.next();
    assert.deepEqual([...versions(first, EDS).keys()], ['s-a']);
    // The ACK swaps the subscription: s-b is sent, s-a is dropped.
    ack(d, first, { subscribe: ['s-b'], unsubscribe: ['s-a'] });
    const swapped = await d.next();
    assert.deepEqual([...versions(swapped, EDS).keys()], ['s-b']);
    assert.deepEqual(swapped.removed_resources, [], 'an unsubscribed name is not reported removed');
    ack(d, swapped);
    await put(canopy, 's-a', 9002);
    assert.equal(await d.maybeNext(QUIET_MS), undefined, 'no update for an unsubscribed resource');
    await put(canopy, 's-b', 9002);
    assert.deepEqual([...versions(await d.next(), EDS).keys()], ['s-b']);
  });

  it('treats an empty first CDS request as wildcard, honours explicit *, and stops when * is unsubscribed', async () => {
    await put(canopy, 'w-a');
    const legacy = open();
    legacy.send({ node: node('w-1'), type_url: CDS });
    const all = await legacy.next();
    assert.ok(versions(all, CDS).has('w-a'), 'the legacy wildcard gets every cluster');
    ack(legacy, all);

    const explicit = open();
    explicit.send({ node: node('w-2'), type_url: LDS, resource_names_subscribe: ['*'] });
    const listeners = await explicit.next();
    assert.ok(versions(listeners, LDS).has('w-a'), 'explicit * gets every listener');
    ack(explicit, listeners);

    await put(canopy, 'w-b');
    assert.deepEqual([...versions(await legacy.next(), CDS).keys()], ['w-b'], 'a new cluster, and only it');
    const pushed = await explicit.next();
    assert.deepEqual([...versions(pushed, LDS).keys()], ['w-b']);
    ack(explicit, pushed, { unsubscribe: ['*'] });
    await put(canopy, 'w-c');
    assert.equal(await explicit.maybeNext(QUIET_MS), undefined, 'no wildcard after unsubscribing *');
  });

  it('reports deleted resources and missing names in removed_resources, and pushes a name once it exists', async () => {
    await put(canopy, 'r-a');
    const d = open();
    d.send({ node: node('r-1'), type_url: EDS, resource_names_subscribe: ['r-a', 'r-ghost'] });
    const first = await d.next();
    assert.deepEqual([...versions(first, EDS).keys()], ['r-a']);
    assert.deepEqual(first.removed_resources, ['r-ghost'], 'a subscribed name that does not exist');
    ack(d, first);
    assert.equal(
      (await statusOf(canopy, 'r-1', EDS)).resources?.find((r) => r.name === 'r-ghost')?.state,
      'DOES_NOT_EXIST',
    );

    await remove(canopy, 'r-a');
    const gone = await d.next();
    assert.deepEqual(gone.resources, []);
    assert.deepEqual(gone.removed_resources, ['r-a']);
    ack(d, gone);
    await put(canopy, 'r-b');
    assert.equal(await d.maybeNext(QUIET_MS), undefined, 'a missing name is reported once, not on every push');

    await put(canopy, 'r-ghost');
    const created = await d.next();
    assert.deepEqual([...versions(created, EDS).keys()], ['r-ghost']);
    assert.deepEqual(created.removed_resources, []);
    ack(d, created);
    await put(canopy, 'r-a');
    assert.deepEqual([...versions(await d.next(), EDS).keys()], ['r-a'], 'a deleted name comes back when re-created');
  });

  it('on reconnect, does not resend versions the client holds, resends stale ones, and reports vanished ones', async () => {
    await put(canopy, 'i-a');
    await put(canopy, 'i-b');
    await put(canopy, 'i-c');
    const d = open();
    d.send({ node: node('i-1'), type_url: EDS, resource_names_subscribe: ['i-a', 'i-b', 'i-c'] });
    const held = versions(await d.next(), EDS);
    d.close();
    await put(canopy, 'i-b', 9002);
    await remove(canopy, 'i-c');

    const again = open();
    again.send({
      node: node('i-1'),
      type_url: EDS,
      resource_names_subscribe: ['i-a', 'i-b', 'i-c'],
      initial_resource_versions: Object.fromEntries(held),
    });
    const r = await again.next();
    const sent = versions(r, EDS);
    assert.deepEqual([...sent.keys()], ['i-b'], 'only the stale one is sent');
    assert.notEqual(sent.get('i-b'), held.get('i-b'));
    assert.deepEqual(r.removed_resources, ['i-c'], 'the vanished one is reported removed');
  });

  it('records a NACK, does not resend it, still applies its subscription changes, and ignores stale nonces', async () => {
    await put(canopy, 'n-a');
    await put(canopy, 'n-b');
    const d = open();
    d.send({ node: node('n-1'), type_url: EDS, resource_names_subscribe: ['n-a'] });
    const first = await d.next();
    ack(d, first);
    await put(canopy, 'n-a', 9002);
    const pushed = await d.next();
    // A NACK that also subscribes to n-b.
    d.send({
      type_url: EDS,
      response_nonce: pushed.nonce,
      resource_names_subscribe: ['n-b'],
      error_detail: { code: 3, message: 'test rejects n-a' },
    });
    const answer = await d.next();
    assert.deepEqual([...versions(answer, EDS).keys()], ['n-b'], 'the NACK subscribed n-b; n-a is not resent');
    ack(d, answer);
    assert.equal(await d.maybeNext(QUIET_MS), undefined, 'no resend loop');
    const status = await statusOf(canopy, 'n-1', EDS);
    assert.equal(status.lastNack?.detail, 'test rejects n-a');
    assert.equal(status.resources?.find((r) => r.name === 'n-a')?.state, 'NACKED');
    assert.equal(status.resources?.find((r) => r.name === 'n-b')?.state, 'ACKED');

    // A NACK with a nonce this stream never sent is stale: not recorded.
    d.send({ type_url: EDS, response_nonce: 'not-ours', error_detail: { code: 3, message: 'stale' } });
    assert.equal(await d.maybeNext(QUIET_MS), undefined);
    assert.equal((await statusOf(canopy, 'n-1', EDS)).lastNack?.detail, 'test rejects n-a');

    // The next change is a new version and is sent.
    await put(canopy, 'n-a', 9003);
    assert.deepEqual([...versions(await d.next(), EDS).keys()], ['n-a']);
  });

  /** A server of its own with `debounceMs`, c-a and c-b from its config (a quiet mesh); `run` gets it and a delta stream holding both. */
  async function withDebounce(debounceMs: number, run: (s: Canopy, d: RawDeltaStream) => Promise<void>) {
    const config = parseConfig({ services: ['c-a', 'c-b'].map((name) => ({ name, ...serviceBody() })) });
    assert.ok(config.ok);
    const own = await startCanopy({
      config: config.value,
      host: '127.0.0.1',
      xdsPort: 0,
      adminPort: 0,
      debounceMs,
      logger: pino({ level: 'silent' }),
    });
    try {
      const d = new RawDeltaStream(own.xdsAddress);
      streams.push(d);
      d.send({ node: node('c-1'), type_url: EDS, resource_names_subscribe: ['c-a', 'c-b'] });
      const first = await d.next();
      assert.deepEqual([...versions(first, EDS).keys()].sort(), ['c-a', 'c-b']);
      ack(d, first);
      await run(own, d);
    } finally {
      await own.stop();
    }
  }

  it('pushes the first change on a quiet mesh at once, not after the debounce', async () => {
    // A debounce far longer than the stream waits (3 s): only a leading-edge push arrives in time.
    await withDebounce(60_000, async (own, d) => {
      await put(own, 'c-a', 9002);
      const pushed = await d.next();
      assert.deepEqual([...versions(pushed, EDS).keys()], ['c-a'], 'c-b did not change');
    });
  });

  it('pushes only changed resources, a burst of 100 changes in a few pushes ending at the last state', async () => {
    await withDebounce(300, async (own, d) => {
      const LAST = 9100;
      const pushes: RawDeltaResponse[] = [];
      const received = (async () => {
        for (;;) {
          const r = await d.next(10_000);
          pushes.push(r);
          ack(d, r);
          if (r.resources.some((x) => x.resource && portOf(x.resource.value) === LAST)) return;
        }
      })();
      for (let port = 9001; port <= LAST; port++) await put(own, 'c-a', port);
      await received;
      for (const r of pushes) assert.deepEqual([...versions(r, EDS).keys()], ['c-a'], 'c-b did not change');
      // The first change alone, then the rest merged (one more push per 3 s maximum delay, or per stall of the loop).
      assert.ok(pushes.length <= 10, `${pushes.length} pushes for 100 changes`);
      assert.equal(await d.maybeNext(700), undefined, 'nothing after the last state');
    });
  });
});
