/** Cheap delta requests: one of strings only (an ACK, a LEDS subscription) is read by hand, exactly as protobufjs reads it. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ENDPOINT_TYPE, LEDS_TYPE } from '../src/resources/type-urls.js';
import { encodeMessage, messageType } from '../src/wire/protos.js';
import { decodeDeltaDiscoveryRequest, decodePlainDeltaRequest } from '../src/wire/request.js';

const REQUEST = 'envoy.service.discovery.v3.DeltaDiscoveryRequest';

/** What protobufjs makes of the bytes, in the decoder's shape. */
function byProtobufjs(bytes: Uint8Array) {
  const type = messageType(REQUEST);
  const raw = type.toObject(type.decode(bytes)) as Record<string, unknown>;
  return {
    typeUrl: (raw['type_url'] as string | undefined) ?? '',
    subscribe: (raw['resource_names_subscribe'] as string[] | undefined) ?? [],
    unsubscribe: (raw['resource_names_unsubscribe'] as string[] | undefined) ?? [],
    initialVersions: {},
    responseNonce: (raw['response_nonce'] as string | undefined) ?? '',
  };
}

const glob = (i: number) => `xdstp://canopy/envoy.config.endpoint.v3.LbEndpoint/svc/r${i}/z0/s0/*`;

describe('decodePlainDeltaRequest', () => {
  const plain: [string, object][] = [
    ['an empty request', {}],
    ['an ACK', { type_url: LEDS_TYPE, response_nonce: '7' }],
    [
      'a subscription to many globs',
      { type_url: LEDS_TYPE, resource_names_subscribe: [...Array(1000).keys()].map(glob) },
    ],
    [
      'subscribe and unsubscribe together, non-ASCII and a leading BOM',
      { type_url: ENDPOINT_TYPE, resource_names_subscribe: ['ünï', '\uFEFFb'], resource_names_unsubscribe: ['a', '*'] },
    ],
    ['a long name (two-byte length)', { resource_names_subscribe: ['x'.repeat(300)], type_url: ENDPOINT_TYPE }],
  ];
  for (const [what, value] of plain) {
    it(`reads ${what} as protobufjs does`, () => {
      const bytes = encodeMessage(REQUEST, value);
      assert.deepEqual(decodePlainDeltaRequest(bytes), byProtobufjs(bytes));
      assert.deepEqual(decodeDeltaDiscoveryRequest(bytes), byProtobufjs(bytes));
    });
  }

  const full: [string, object, (r: ReturnType<typeof decodeDeltaDiscoveryRequest>) => boolean][] = [
    ['a node', { node: { id: 'n1' }, type_url: ENDPOINT_TYPE }, (r) => r.node?.id === 'n1'],
    [
      'initial versions',
      { type_url: LEDS_TYPE, initial_resource_versions: { a: '1' } },
      (r) => r.initialVersions['a'] === '1',
    ],
    [
      'an error (a NACK)',
      { type_url: ENDPOINT_TYPE, response_nonce: '3', error_detail: { code: 3, message: 'bad' } },
      (r) => r.errorDetail?.message === 'bad',
    ],
  ];
  for (const [what, value, check] of full) {
    it(`leaves a request with ${what} to protobufjs`, () => {
      const bytes = encodeMessage(REQUEST, value);
      assert.equal(decodePlainDeltaRequest(bytes), undefined);
      assert.ok(check(decodeDeltaDiscoveryRequest(bytes)));
    });
  }

  it('refuses truncated bytes, leaving them to the full decoder', () => {
    const bytes = encodeMessage(REQUEST, { type_url: LEDS_TYPE, response_nonce: '7' });
    assert.equal(decodePlainDeltaRequest(bytes.subarray(0, bytes.length - 1)), undefined);
  });
});
