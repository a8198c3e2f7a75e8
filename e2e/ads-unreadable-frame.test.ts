/**
 * A request frame the server cannot read ends its stream with a status, even
 * when it arrives in one TCP write behind valid requests whose responses are
 * still being written (grpc-js' own status was lost there: one response, then
 * silence). Driven with bare HTTP/2 against a spawned `canopy serve`.
 */
import assert from 'node:assert/strict';
import { gzipSync } from 'node:zlib';
import { after, before, describe, it } from 'node:test';
import { startCanopyProcess, type CanopyProcess } from './support/canopy-process.js';
import { encodeEnvoy, grpcFrame, openRawCall, type RawCall } from './support/raw-grpc-frames.js';

const EDS = 'type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment';
const ADS = '/envoy.service.discovery.v3.AggregatedDiscoveryService/';
const INVALID_ARGUMENT = 3;

const sotw = (value: object) => encodeEnvoy('envoy.service.discovery.v3.DiscoveryRequest', value);
const delta = (value: object) => encodeEnvoy('envoy.service.discovery.v3.DeltaDiscoveryRequest', value);

/** The call's status; fails on silence (none within `ms`) or a reset without one. */
async function statusWithin(call: RawCall, ms: number): Promise<{ code: number; message: string }> {
  let timer: NodeJS.Timeout | undefined;
  const silence = new Promise<'silence'>((resolve) => (timer = setTimeout(() => resolve('silence'), ms)));
  try {
    const status = await Promise.race([call.status, silence]);
    assert.ok(typeof status === 'object', `a status, not ${status}, after ${call.messages.length} responses`);
    return status;
  } finally {
    clearTimeout(timer);
  }
}

describe('an unreadable request frame', () => {
  let canopy: CanopyProcess;
  const calls: RawCall[] = [];
  before(async () => {
    canopy = await startCanopyProcess({
      services: ['echo', 'other'].map((name) => ({ name, endpoints: [{ address: '10.0.0.1', port: 80 }] })),
    });
  });
  after(async () => {
    for (const c of calls) c.close();
    await canopy?.stop();
  });

  const open = (method: string, headers = {}) => {
    const call = openRawCall(canopy.xdsUri, ADS + method, headers);
    calls.push(call);
    return call;
  };

  it('SotW: two valid requests and a compressed frame without grpc-encoding in one write end with a status', async () => {
    const first = sotw({ node: { id: 'frames-1' }, type_url: EDS, resource_names: ['echo'] });
    const second = sotw({ type_url: EDS, resource_names: ['echo', 'other'] });
    const call = open('StreamAggregatedResources');
    call.write(Buffer.concat([grpcFrame(first), grpcFrame(second), grpcFrame(gzipSync(second), true)]));
    const status = await statusWithin(call, 5000);
    assert.equal(status.code, INVALID_ARGUMENT);
    assert.match(
      status.message,
      /DiscoveryRequest frame has the compressed flag set but the call declared no grpc-encoding/,
    );
    assert.ok(call.messages.length >= 1, 'the requests before it were answered');
  });

  it('delta: the same, on DeltaAggregatedResources', async () => {
    const first = delta({ node: { id: 'frames-2' }, type_url: EDS, resource_names_subscribe: ['echo'] });
    const second = delta({ type_url: EDS, resource_names_subscribe: ['other'] });
    const call = open('DeltaAggregatedResources');
    call.write(Buffer.concat([grpcFrame(first), grpcFrame(second), grpcFrame(gzipSync(second), true)]));
    const status = await statusWithin(call, 5000);
    assert.equal(status.code, INVALID_ARGUMENT);
    assert.match(status.message, /DeltaDiscoveryRequest/);
  });

  it('a compressed frame whose bytes happen to decode is refused too, not read as plain', async () => {
    const call = open('StreamAggregatedResources');
    call.write(grpcFrame(sotw({ node: { id: 'frames-5' }, type_url: EDS, resource_names: ['echo'] }), true));
    const status = await statusWithin(call, 5000);
    assert.equal(status.code, INVALID_ARGUMENT);
    assert.equal(call.messages.length, 0);
  });

  it('bytes that are not a request end the stream the same way, and the server goes on serving', async () => {
    const call = open('StreamAggregatedResources');
    const first = sotw({ node: { id: 'frames-3' }, type_url: EDS, resource_names: ['echo'] });
    call.write(Buffer.concat([grpcFrame(first), grpcFrame(Buffer.from([0xff, 0xff, 0xff, 0x01, 0x02]))]));
    const status = await statusWithin(call, 5000);
    assert.equal(status.code, INVALID_ARGUMENT);
    assert.match(status.message, /a message of 5 bytes is not a valid envoy\.service\.discovery\.v3\.DiscoveryRequest/);

    // A compressed frame the client declared (grpc-encoding: gzip) is read and answered.
    const gz = open('StreamAggregatedResources', { 'grpc-encoding': 'gzip' });
    gz.write(grpcFrame(gzipSync(sotw({ node: { id: 'frames-4' }, type_url: EDS, resource_names: ['echo'] })), true));
    for (let i = 0; i < 50 && gz.messages.length === 0; i++) await new Promise((r) => setTimeout(r, 100));
    assert.equal(gz.messages.length, 1, 'the declared gzip request is answered');
  });
});
