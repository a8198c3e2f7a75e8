/**
 * What a careless or hostile ADS client can do to the server, over real gRPC
 * streams on loopback: junk type URLs keep no state, limits end a stream with
 * a clear status, a client that stops reading holds one response, a response
 * over 4 MiB is reported, and a re-created service's routes are new bytes.
 */
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { pino } from 'pino';
import { parseConfig } from '../server/src/domain/spec.js';
import { startCanopy, type Canopy } from '../server/src/main.js';
import type { ClientStatus } from '../server/src/sessions/client-status.js';
import { RawAdsStream, RawDeltaStream } from './support/raw-ads.js';
import { StalledAdsClient } from './support/stalled-ads.js';

const EDS = 'type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment';
const RDS = 'type.googleapis.com/envoy.config.route.v3.RouteConfiguration';
const QUIET_MS = 400;
const INVALID_ARGUMENT = 3;
const RESOURCE_EXHAUSTED = 8;

const node = (id: string) => ({ id, cluster: 'test', locality: { region: 'r1', zone: 'z1', sub_zone: 's1' } });

function service(name: string, endpoints: number) {
  return {
    name,
    loadBalancing: { mode: 'failover' },
    endpoints: Array.from({ length: endpoints }, (_, i) => ({
      address: `127.${1 + (i >> 16)}.${(i >> 8) & 255}.${i & 255}`,
      port: 9000,
      locality: { region: `r${i % 3}`, zone: `z${i % 5}`, subzone: 's1' },
    })),
  };
}

async function start(services: object[], logger = pino({ level: 'silent' })): Promise<Canopy> {
  const parsed = parseConfig({ services });
  assert.ok(parsed.ok, JSON.stringify(parsed));
  return startCanopy({ config: parsed.value, host: '127.0.0.1', xdsPort: 0, adminPort: 0, debounceMs: 20, logger });
}

async function clientOf(canopy: Canopy, nodeId: string): Promise<ClientStatus> {
  const body = (await (await fetch(`http://${canopy.adminAddress}/debug/clients`)).json()) as {
    clients: ClientStatus[];
  };
  const c = body.clients.find((x) => x.nodeId === nodeId);
  assert.ok(c, `${nodeId} is connected`);
  return c;
}

async function metric(canopy: Canopy, line: RegExp): Promise<number> {
  const text = await (await fetch(`http://${canopy.adminAddress}/metrics`)).text();
  let sum = 0;
  for (const l of text.split('\n')) if (line.test(l)) sum += Number(l.split(' ').pop());
  return sum;
}

describe('ADS robustness', () => {
  let canopy: Canopy;
  const streams: (RawAdsStream | RawDeltaStream)[] = [];
  const stalledClients: StalledAdsClient[] = [];

  before(async () => {
    canopy = await start([service('small', 3), service('big', 3000)]);
  });
  after(async () => {
    for (const s of streams) s.close();
    for (const s of stalledClients) s.close();
    await canopy?.stop();
  });

  it('ignores requests for types it does not serve, keeps no state for them, and goes on serving', async () => {
    const refusedBefore = await metric(canopy, /^canopy_xds_refused_requests_total\{reason="unserved_type"\}/);
    const sotw = new RawAdsStream(canopy.xdsAddress);
    streams.push(sotw);
    sotw.send({ node: node('junk-1'), type_url: '', resource_names: ['x'] });
    for (let i = 0; i < 2000; i++)
      await sotw.sendAndFlush({ type_url: `type.example/junk.${i}`, resource_names: ['x'] });
    sotw.send({ type_url: EDS, resource_names: ['small'] });
    const r = await sotw.next(10_000);
    assert.equal(r.type_url, EDS, 'the first response is the EDS answer: junk requests get none');
    const status = await clientOf(canopy, 'junk-1');
    assert.deepEqual(
      status.types.map((t) => t.typeUrl),
      [EDS],
      'no per-type state for junk',
    );
    assert.equal(status.ignoredRequests, 2001);

    const delta = new RawDeltaStream(canopy.xdsAddress);
    streams.push(delta);
    delta.send({ node: node('junk-2'), type_url: 'type.example/junk', resource_names_subscribe: ['x'] });
    delta.send({ type_url: EDS, resource_names_subscribe: ['small'] });
    assert.equal((await delta.next()).type_url, EDS);
    assert.equal((await clientOf(canopy, 'junk-2')).ignoredRequests, 1);
    const refused = await metric(canopy, /^canopy_xds_refused_requests_total\{reason="unserved_type"\}/);
    assert.equal(refused - refusedBefore, 2002);
  });

  it('ends a stream that goes over its limits with INVALID_ARGUMENT naming the limit', async () => {
    const long = new RawAdsStream(canopy.xdsAddress);
    streams.push(long);
    long.send({ node: node('limit-1'), type_url: EDS, resource_names: ['small', 'n'.repeat(1025)] });
    const s1 = await long.status;
    assert.equal(s1.code, INVALID_ARGUMENT);
    assert.match(s1.details, /resource_names: resource name of 1025 characters .* the limit is 1024/);

    const many = new RawAdsStream(canopy.xdsAddress);
    streams.push(many);
    many.send({
      node: node('limit-2'),
      type_url: EDS,
      resource_names: Array.from({ length: 10_001 }, (_, i) => `s${i}`),
    });
    const s2 = await many.status;
    assert.equal(s2.code, INVALID_ARGUMENT);
    assert.match(s2.details, /10001 names .* the limit is 10000/);

    // Delta adds up what the stream holds across requests.
    const delta = new RawDeltaStream(canopy.xdsAddress);
    streams.push(delta);
    const batch = (k: number) => Array.from({ length: 4000 }, (_, i) => `d${k}-${i}`);
    delta.send({ node: node('limit-3'), type_url: EDS, resource_names_subscribe: batch(0) });
    await delta.next();
    delta.send({ type_url: EDS, resource_names_subscribe: batch(1) });
    await delta.next();
    delta.send({ type_url: EDS, resource_names_subscribe: batch(2) });
    const s3 = await delta.status;
    assert.equal(s3.code, INVALID_ARGUMENT);
    assert.match(s3.details, /12000 names .* the limit is 10000/);
  });

  it('holds one response for a client that stops reading, and brings it up to date when it reads again', async () => {
    const responsesBefore = await metric(canopy, /^canopy_xds_responses_total\{/);
    const stalled = new StalledAdsClient(canopy.xdsAddress);
    stalledClients.push(stalled);
    await stalled.send({ node: node('stalled-1'), type_url: EDS, resource_names: ['big'] });
    // Dropping 'big' and asking for it again calls for the whole CLA each time.
    for (let i = 0; i < 200; i++) await stalled.send({ type_url: EDS, resource_names: i % 2 ? ['big'] : [`x${i}`] });
    // Changes to what it holds, too.
    for (let port = 9001; port <= 9010; port++)
      await canopy.store.put(parseService('big', 3000, port), { owner: 'api' });
    await new Promise((r) => setTimeout(r, 1000));
    const written = (await metric(canopy, /^canopy_xds_responses_total\{/)) - responsesBefore;
    assert.ok(
      written <= 2,
      `a stalled stream was written ${written} responses: one, held by flow control, is the bound`,
    );

    stalled.resume();
    await until(() => stalled.received.length > 0 && stalled.received.at(-1)!.resources.length > 0);
    await new Promise((r) => setTimeout(r, QUIET_MS));
    assert.ok(stalled.received.length <= 4, `caught up in ${stalled.received.length} responses, not one per request`);
    const status = await clientOf(canopy, 'stalled-1');
    assert.equal(
      status.types[0]?.versionSent,
      stalled.received.at(-1)!.version_info,
      'the last response is the current state',
    );
    assert.deepEqual(status.types[0]?.subscribed, ['big']);
  });

  it('re-creates a deleted service as a distinguishable RouteConfiguration', async () => {
    const ads = new RawAdsStream(canopy.xdsAddress);
    streams.push(ads);
    ads.send({ node: node('inc-1'), type_url: RDS, resource_names: ['small'] });
    const first = await ads.next();
    ads.send({
      type_url: RDS,
      version_info: first.version_info,
      response_nonce: first.nonce,
      resource_names: ['small'],
    });
    const spec = canopy.mesh.get('small')!.spec;
    await canopy.store.delete('small');
    // RDS is not full state: a deleted route goes with its listener, no RDS response is due.
    assert.equal(await ads.maybeNext(QUIET_MS), undefined);
    await canopy.store.put(spec, { owner: 'api' });
    const back = await ads.next();
    assert.equal(back.resources.length, 1);
    assert.notEqual(back.version_info, first.version_info, 'a new version');
    assert.notDeepEqual(back.resources[0]!.value, first.resources[0]!.value, 'new bytes');
    assert.ok(back.resources[0]!.value.toString('latin1').includes('incarnation-1'));
  });
});

describe('a response over the default 4 MiB gRPC receive limit', () => {
  let canopy: Canopy;
  const logs: string[] = [];
  const streams: RawAdsStream[] = [];

  before(async () => {
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        logs.push(chunk.toString());
        done();
      },
    });
    // About 22 bytes per endpoint on the wire: 220,000 of them make a CLA of about 4.7 MiB.
    canopy = await start([service('huge', 220_000)], pino({ level: 'warn' }, sink));
  });
  after(async () => {
    for (const s of streams) s.close();
    await canopy?.stop();
  });

  it('is logged with the client and resource, counted in /metrics, and shown in /debug/clients', async () => {
    const raised = new RawAdsStream(canopy.xdsAddress, { 'grpc.max_receive_message_length': 64 * 1024 * 1024 });
    streams.push(raised);
    raised.send({ node: node('huge-1'), type_url: EDS, resource_names: ['huge'] });
    const r = await raised.next(30_000);
    assert.equal(r.resources.length, 1, 'a client with a raised limit receives it');
    assert.ok(r.resources[0]!.value.length > 4 * 1024 * 1024);

    const warning = logs.find((l) => l.includes('over 4194304'));
    assert.ok(warning, 'a warning was logged');
    assert.match(warning, /"node":"huge-1"/);
    assert.match(warning, /"resources":\["huge"\]/);
    assert.equal(await metric(canopy, /^canopy_xds_oversized_responses_total\{type="EDS"\}/), 1);
    const status = await clientOf(canopy, 'huge-1');
    assert.deepEqual(status.oversized?.names, ['huge']);
    assert.equal(status.oversized?.count, 1);

    // What the warning is about: a client with the default limit loses its stream.
    const plain = new RawAdsStream(canopy.xdsAddress);
    streams.push(plain);
    plain.send({ node: node('huge-2'), type_url: EDS, resource_names: ['huge'] });
    assert.equal((await plain.status).code, RESOURCE_EXHAUSTED);
  });
});

function parseService(name: string, endpoints: number, port: number) {
  const s = service(name, endpoints);
  const parsed = parseConfig({ services: [{ ...s, endpoints: s.endpoints.map((e) => ({ ...e, port })) }] });
  assert.ok(parsed.ok);
  return parsed.value.services[0]!;
}

async function until(done: () => boolean, timeoutMs = 5000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!done()) {
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 20));
  }
}
