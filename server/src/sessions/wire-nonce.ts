/**
 * The nonce a response carries on the wire, made from its content (the key
 * its shared bytes go by: type, version, resources), not from the stream's
 * history. Every stream sending the same content then sends byte-identical
 * responses, whether it has been up for a day or connected a moment ago, and
 * a fleet reconnecting after a push reuses the push's encodings.
 *
 * A nonce only has to tell a stream's own responses apart (xds_protocol.rst,
 * "ACK/NACK and resource type instance version"): the one an ACK or NACK
 * answers, among those of that type not answered yet. So a nonce equal to the
 * last one sent, or to one still unanswered (the same content sent twice in a
 * row, a warming re-request answered in full), gets the stream's own sequence
 * number appended: `<hash>.<sequence>`, unique in the stream since a hash has
 * no dot. The stream keeps its numeric sequence for ordering and CSDS.
 */
import { fastDigest } from '../wire/rope.js';
import { utf8Bytes } from '../wire/wire.js';

/** 36^7: a hash of at most 7 base-36 characters (about 46 bits), 12 with a suffix up to 36^4 responses. */
const SPAN = 36 ** 7;

/** The nonce for content `key`, sent as the stream's response `sequence`; `taken`: nonces it may not reuse. */
export function wireNonce(key: string, sequence: number, taken: (nonce: string) => boolean): string {
  const nonce = (fastDigest(utf8Bytes(key)) % SPAN).toString(36);
  return taken(nonce) ? `${nonce}.${sequence.toString(36)}` : nonce;
}
