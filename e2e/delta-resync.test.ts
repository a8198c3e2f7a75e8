/**
 * A delta client that reconnects with `initial_resource_versions` is sent only what changed: nothing
 * when everything it holds is current, even on another replica (versions are content hashes, equal on
 * two independently started servers fed the same services), and exactly the changed resource when
 * one is not. Real gRPC streams on loopback; bytes counted as the resources' encoded payloads.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { pino } from 'pino';
import { startCanopy, type Canopy } from '../server/src/main.js';
import { RawDeltaStream, type RawDeltaResponse } from './support/raw-ads.js';

const CDS = 'type.googleapis.com/envoy.config.cluster.v3.Cluster';
const EDS = 'type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment';
const QUIET_MS = 400;
const SERVICES = ['rs-a', 'rs-b', 'rs-c', 'rs-d'];
const node = { id: 'rs-1', cluster: 'test', locality: { region: 'r1', zone: 'z1', sub_zone: 's1' } };

async function put(canopy: Canopy, name: string, port = 9001): Promise<void> {
  const endpoints = Array.from({ length: 20 }, (_, i) => ({
    address: `127.0.${Math.floor(i / 10) + 1}.${(i % 10) + 2}`,
    port,
    locality: { region: 'r1', zone: `z${(i % 3) + 1}`, subzone: 's1' },
  }));
  const res = await fetch(`http://${canopy.adminAddress}/api/v1/services/${name}`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ loadBalancing: { mode: 'failover' }, endpoints }),
  });
  assert.ok(res.status < 300, await res.text());
}

const start = () =>
  startCanopy({
    config: { services: [], server: {} },
    host: '127.0.0.1',
    xdsPort: 0,
    adminPort: 0,
    debounceMs: 20,
    logger: pino({ level: 'silent' }),
  });

const payloadBytes = (r: RawDeltaResponse | undefined): number =>
  (r?.resources ?? []).reduce((n, x) => n + (x.resource?.value.length ?? 0), 0);

const held = (r: RawDeltaResponse): Record<string, string> =>
  Object.fromEntries(r.resources.map((x) => [x.name, x.version]));

/** CDS (wildcard) then EDS for every service, each ACKed; what the client then holds, per type. */
async function sync(stream: RawDeltaStream): Promise<{ cds: RawDeltaResponse; eds: RawDeltaResponse }> {
  stream.send({ node, type_url: CDS });
  const cds = await stream.next();
  stream.send({ type_url: CDS, response_nonce: cds.nonce });
  stream.send({ node, type_url: EDS, resource_names_subscribe: SERVICES });
  const eds = await stream.next();
  stream.send({ type_url: EDS, response_nonce: eds.nonce });
  return { cds, eds };
}

/** A reconnect holding these versions: each type's response (undefined: none came within QUIET_MS). */
async function reconnect(stream: RawDeltaStream, cds: Record<string, string>, eds: Record<string, string>) {
  stream.send({ node, type_url: CDS, initial_resource_versions: cds });
  const c = await stream.maybeNext(QUIET_MS);
  if (c) stream.send({ type_url: CDS, response_nonce: c.nonce });
  stream.send({ node, type_url: EDS, resource_names_subscribe: SERVICES, initial_resource_versions: eds });
  const e = await stream.maybeNext(QUIET_MS);
  return { cds: c, eds: e };
}

describe('delta re-sync with initial_resource_versions', () => {
  let a: Canopy;
  let b: Canopy;
  const streams: RawDeltaStream[] = [];
  const open = (c: Canopy): RawDeltaStream => {
    const s = new RawDeltaStream(c.xdsAddress);
    streams.push(s);
    return s;
  };

  before(async () => {
    [a, b] = await Promise.all([start(), start()]);
    for (const name of SERVICES) await Promise.all([put(a, name), put(b, name)]);
  });
  after(async () => {
    for (const s of streams) s.close();
    await Promise.all([a?.stop(), b?.stop()]);
  });

  it('re-sends nothing to a client moving to another replica with every version current', async () => {
    const first = open(a);
    const was = await sync(first);
    first.close();
    assert.equal(Object.keys(held(was.cds)).length, SERVICES.length);
    assert.equal(Object.keys(held(was.eds)).length, SERVICES.length);
    const initialBytes = payloadBytes(was.cds) + payloadBytes(was.eds);
    assert.ok(initialBytes > 1000, `the first sync carried ${initialBytes} bytes of resources`);

    const again = await reconnect(open(b), held(was.cds), held(was.eds));
    assert.deepEqual(again.cds?.resources ?? [], [], 'no Cluster re-sent');
    assert.deepEqual(again.eds?.resources ?? [], [], 'no ClusterLoadAssignment re-sent, none owed by warming');
    assert.deepEqual([...(again.cds?.removed_resources ?? []), ...(again.eds?.removed_resources ?? [])], []);
    assert.equal(payloadBytes(again.cds) + payloadBytes(again.eds), 0, 'zero resource bytes on the re-sync');
  });

  it('re-sends exactly the resource whose version differs', async () => {
    const was = await sync(open(a));
    await Promise.all([put(a, 'rs-c', 9002), put(b, 'rs-c', 9002)]);
    const again = await reconnect(open(b), held(was.cds), held(was.eds));
    assert.deepEqual(
      again.eds?.resources.map((r) => r.name),
      ['rs-c'],
      'only the changed ClusterLoadAssignment is sent',
    );
    assert.notEqual(again.eds?.resources[0]?.version, held(was.eds)['rs-c']);
    assert.deepEqual(again.cds?.resources ?? [], [], 'its Cluster did not change: not re-sent');
    assert.ok(payloadBytes(again.eds) < payloadBytes(was.eds), 'fewer bytes than the first sync');
  });
});
