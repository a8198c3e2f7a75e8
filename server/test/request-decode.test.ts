/** Cheap ACKs: a DiscoveryRequest of strings only is read by hand, and reads exactly as protobufjs reads it. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ENDPOINT_TYPE } from '../src/resources/type-urls.js';
import { encodeMessage, messageType } from '../src/wire/protos.js';
import { decodeDiscoveryRequest, decodePlainRequest } from '../src/wire/request.js';

const REQUEST = 'envoy.service.discovery.v3.DiscoveryRequest';

/** What protobufjs makes of the bytes, in the decoder's shape. */
function byProtobufjs(bytes: Uint8Array) {
  const type = messageType(REQUEST);
  const raw = type.toObject(type.decode(bytes)) as Record<string, unknown>;
  return {
    versionInfo: (raw['version_info'] as string | undefined) ?? '',
    resourceNames: (raw['resource_names'] as string[] | undefined) ?? [],
    typeUrl: (raw['type_url'] as string | undefined) ?? '',
    responseNonce: (raw['response_nonce'] as string | undefined) ?? '',
  };
}

describe('decodePlainRequest', () => {
  const plain: [string, object][] = [
    ['an empty request', {}],
    ['an ACK', { version_info: 'a1b2', type_url: ENDPOINT_TYPE, response_nonce: '7' }],
    [
      'an ACK with names',
      { version_info: 'v', resource_names: ['a', 'b', 'ünï'], type_url: ENDPOINT_TYPE, response_nonce: '12' },
    ],
    ['a long name (two-byte length)', { resource_names: ['x'.repeat(300)], type_url: ENDPOINT_TYPE }],
  ];
  for (const [what, value] of plain) {
    it(`reads ${what} as protobufjs does`, () => {
      const bytes = encodeMessage(REQUEST, value);
      assert.deepEqual(decodePlainRequest(bytes), byProtobufjs(bytes));
      assert.deepEqual(decodeDiscoveryRequest(bytes), byProtobufjs(bytes));
    });
  }

  const full: [string, object][] = [
    ['a node', { node: { id: 'n1' }, type_url: ENDPOINT_TYPE }],
    ['an error (a NACK)', { type_url: ENDPOINT_TYPE, response_nonce: '3', error_detail: { code: 3, message: 'bad' } }],
  ];
  for (const [what, value] of full) {
    it(`leaves a request with ${what} to protobufjs`, () => {
      const bytes = encodeMessage(REQUEST, value);
      assert.equal(decodePlainRequest(bytes), undefined);
      assert.ok(decodeDiscoveryRequest(bytes).node || decodeDiscoveryRequest(bytes).errorDetail);
    });
  }

  it('refuses truncated bytes, leaving them to the full decoder', () => {
    const bytes = encodeMessage(REQUEST, { type_url: ENDPOINT_TYPE, response_nonce: '7' });
    assert.equal(decodePlainRequest(bytes.subarray(0, bytes.length - 1)), undefined);
  });
});
