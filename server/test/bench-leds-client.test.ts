/**
 * The bench's LEDS client (bench/delta-wire.ts, bench/response-record.ts)
 * against a canopy-less fake: a CLA naming LEDS collections built with
 * Envoy's own protos, wrapped in a DeltaDiscoveryResponse, is read back to the
 * collection names; the requests it writes decode as Canopy decodes them; a
 * record replays the bytes it was given.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { collectionsInResponse, deltaRequest, deltaResponseHead } from '../../bench/delta-wire.js';
import { LEDS_TYPE } from '../../bench/leds-stream.js';
import { ResponseRecord, ResponseRecorder } from '../../bench/response-record.js';
import { ENDPOINT_TYPE } from '../src/resources/type-urls.js';
import { encodeAny, encodeDeltaDiscoveryResponse } from '../src/wire/envelope.js';
import { encodeMessage } from '../src/wire/protos.js';
import { decodeDeltaDiscoveryRequest } from '../src/wire/request.js';

const collection = (leaf: string) => `xdstp://canopy/envoy.config.endpoint.v3.LbEndpoint/svc/${leaf}/*`;

function cla(entries: object[]): Uint8Array {
  return encodeMessage('envoy.config.endpoint.v3.ClusterLoadAssignment', {
    cluster_name: 'svc',
    endpoints: entries,
    policy: { overprovisioning_factor: { value: 140 } },
  });
}

function ledsEntry(leaf: string, priority: number): object {
  const [region, zone, sub_zone] = leaf.split('/');
  return {
    locality: { region, zone, sub_zone },
    priority,
    load_balancing_weight: { value: 10 },
    leds_cluster_locality_config: {
      leds_config: { ads: {}, resource_api_version: 'V3' },
      leds_collection_name: collection(leaf),
    },
  };
}

function response(typeUrl: string, resources: { name: string; message: Uint8Array }[], nonce: string): Buffer {
  return encodeDeltaDiscoveryResponse({
    systemVersionInfo: 'v1',
    typeUrl,
    nonce,
    resources: resources.map((r) => ({ name: r.name, version: 'h1', any: encodeAny(typeUrl, r.message) })),
    removed: [],
  });
}

describe('bench LEDS client: reading delta responses', () => {
  it('finds every collection a CLA names, in order, and the nonce and type to ACK', () => {
    const leaves = ['r0/z0/s0', 'r0/z1/s0', 'r1/z0/s2'];
    const buf = response(ENDPOINT_TYPE, [{ name: 'svc', message: cla(leaves.map((l, i) => ledsEntry(l, i))) }], '7');
    const head = deltaResponseHead(buf);
    assert.equal(head.typeUrl, ENDPOINT_TYPE);
    assert.equal(head.nonce, '7');
    assert.deepEqual(collectionsInResponse(buf, head), leaves.map(collection));
  });

  it('finds no collection in a CLA that lists its endpoints', () => {
    const full = cla([
      {
        locality: { region: 'r0', zone: 'z0', sub_zone: 's0' },
        lb_endpoints: [{ endpoint: { address: { socket_address: { address: '10.0.0.1', port_value: 8080 } } } }],
      },
    ]);
    const buf = response(ENDPOINT_TYPE, [{ name: 'svc', message: full }], '1');
    assert.deepEqual(collectionsInResponse(buf, deltaResponseHead(buf)), []);
  });

  it('reads type and nonce of a member response whatever its resources hold', () => {
    const member = encodeMessage('envoy.config.endpoint.v3.LbEndpoint', {
      endpoint: { address: { socket_address: { address: '10.0.0.1', port_value: 8080 } } },
      health_status: 'UNHEALTHY',
    });
    const buf = response(
      LEDS_TYPE,
      [{ name: `${collection('r0/z0/s0').slice(0, -1)}10.0.0.1:8080`, message: member }],
      '12',
    );
    const head = deltaResponseHead(buf);
    assert.equal(head.typeUrl, LEDS_TYPE);
    assert.equal(head.nonce, '12');
    assert.equal(head.anys.length, 1);
  });
});

describe('bench LEDS client: its requests', () => {
  it('decode as Canopy decodes a delta request: node with user agent, subscriptions, nonce', () => {
    const first = decodeDeltaDiscoveryRequest(
      deltaRequest({
        typeUrl: ENDPOINT_TYPE,
        subscribe: ['svc'],
        node: { id: 'bench-3', userAgent: 'envoy', region: 'r1', zone: 'z2', subzone: 's3' },
      }),
    );
    assert.equal(first.node?.id, 'bench-3');
    assert.equal(first.node?.userAgentName, 'envoy');
    assert.deepEqual(first.node?.locality, { region: 'r1', zone: 'z2', subzone: 's3' });
    assert.deepEqual(first.subscribe, ['svc']);
    assert.equal(first.responseNonce, '');
    const ack = decodeDeltaDiscoveryRequest(deltaRequest({ typeUrl: LEDS_TYPE, nonce: '9' }));
    assert.equal(ack.node, undefined);
    assert.equal(ack.typeUrl, LEDS_TYPE);
    assert.equal(ack.responseNonce, '9');
    assert.deepEqual(ack.subscribe, []);
    const sub = decodeDeltaDiscoveryRequest(
      deltaRequest({ typeUrl: LEDS_TYPE, subscribe: [collection('a/b/c'), collection('d/e/f')] }),
    );
    assert.deepEqual(sub.subscribe, [collection('a/b/c'), collection('d/e/f')]);
  });
});

describe('bench response record', () => {
  it('replays per stream, per type and per burst the bytes it recorded, identical ones stored once', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'bench-record-'));
    try {
      const rec = new ResponseRecorder();
      const a = Buffer.from('cla-a');
      const members = Buffer.from('members');
      rec.add(0, ENDPOINT_TYPE, a);
      rec.add(0, LEDS_TYPE, members);
      rec.add(1, ENDPOINT_TYPE, Buffer.from('cla-b'));
      rec.add(1, LEDS_TYPE, Buffer.from('members'));
      rec.mark();
      rec.add(1, LEDS_TYPE, Buffer.from('flip'));
      const file = path.join(dir, 'r.json');
      rec.save(file);
      const back = new ResponseRecord(file);
      assert.equal(back.streams, 2);
      assert.equal(back.burstCount, 1);
      assert.deepEqual(back.initial(0, ENDPOINT_TYPE).map(String), ['cla-a']);
      assert.deepEqual(back.initial(3, ENDPOINT_TYPE).map(String), ['cla-b'], 'stream 3 replays recorded stream 1');
      assert.deepEqual(back.initial(2, LEDS_TYPE).map(String), ['members']);
      assert.deepEqual(back.burst(0, 0).map(String), []);
      assert.deepEqual(back.burst(0, 1).map(String), ['flip']);
      assert.equal(
        statSync(`${file}.bin`).size,
        'cla-a'.length + 'members'.length + 'cla-b'.length + 'flip'.length,
        'one copy of identical bytes',
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
