/**
 * The response envelope: a DiscoveryResponse assembled from resources already
 * encoded as google.protobuf.Any, so every stream sharing a resource writes the
 * same bytes and only the small envelope (version, nonce) is per stream.
 */
import { combineDigests, fastDigest, type Bytes, type Rope } from './rope.js';
import { fieldSize, optionalFieldSize, utf8Bytes, WireWriter } from './wire.js';

/** Responses of at least this many bytes are encoded into shared memory (`Infinity`: none). */
let shareFromBytes = Infinity;

/**
 * From now on, responses of at least `bytes` are encoded straight into shared memory (`Infinity`: none, the
 * default): the xDS workers (transport/xds-workers.ts) write those bytes as they are, so the encoding is
 * the only copy of a response, not one beside a shared copy.
 */
export function encodeResponsesShared(bytes: number): void {
  shareFromBytes = bytes;
}

export function encodeAny(typeUrl: string, value: Uint8Array): Uint8Array {
  const url = utf8Bytes(typeUrl);
  return new WireWriter(fieldSize(1, url.length) + fieldSize(2, value.length)).bytes(1, url).bytes(2, value).finish();
}

export function encodeDiscoveryResponse(r: {
  readonly versionInfo: string;
  readonly typeUrl: string;
  readonly nonce: string;
  /** Each an encoded google.protobuf.Any, contiguous or a rope (copied part by part). */
  readonly resources: readonly Bytes[];
}): Buffer {
  const version = utf8Bytes(r.versionInfo);
  const type = utf8Bytes(r.typeUrl);
  const nonce = utf8Bytes(r.nonce);
  let size =
    optionalFieldSize(1, version.length) + optionalFieldSize(4, type.length) + optionalFieldSize(5, nonce.length);
  for (const any of r.resources) size += fieldSize(2, any.length);
  const w = new WireWriter(size, size >= shareFromBytes).optionalBytes(1, version);
  for (const any of r.resources) w.part(2, any);
  const out = w.optionalBytes(4, type).optionalBytes(5, nonce).finish();
  return Buffer.from(out.buffer, out.byteOffset, out.byteLength);
}

/** A google.protobuf.Any around a rope: its header follows the rope's length. */
export function anyRope(typeUrl: string, value: Rope): Rope {
  const url = utf8Bytes(typeUrl);
  const urlField = new WireWriter(fieldSize(1, url.length)).bytes(1, url).finish();
  const urlDigest = fastDigest(url);
  let of = -1;
  let is = 0;
  return {
    get length() {
      return urlField.length + fieldSize(2, value.length);
    },
    get digest() {
      const d = value.digest;
      if (d !== of) {
        of = d;
        is = combineDigests([urlDigest, d]);
      }
      return is;
    },
    copyTo(dst: Uint8Array, at: number): number {
      dst.set(urlField, at);
      return writeField(dst, at + urlField.length, 2, value);
    },
  };
}

/** Tag, length and body of a length-delimited field, written into `dst` at `at`. */
function writeField(dst: Uint8Array, at: number, field: number, body: Rope): number {
  let n = (field << 3) | 2;
  while (n >= 0x80) {
    dst[at++] = (n & 0x7f) | 0x80;
    n = Math.floor(n / 128);
  }
  dst[at++] = n;
  let len = body.length;
  while (len >= 0x80) {
    dst[at++] = (len & 0x7f) | 0x80;
    len = Math.floor(len / 128);
  }
  dst[at++] = len;
  return body.copyTo(dst, at);
}

/** One envoy.service.discovery.v3.Resource of a delta response: name, version and the Any. */
export interface DeltaResource {
  readonly name: string;
  readonly version: string;
  readonly any: Bytes;
}

export function encodeDeltaDiscoveryResponse(r: {
  readonly systemVersionInfo: string;
  readonly typeUrl: string;
  readonly nonce: string;
  readonly resources: readonly DeltaResource[];
  readonly removed: readonly string[];
}): Buffer {
  const sys = utf8Bytes(r.systemVersionInfo);
  const type = utf8Bytes(r.typeUrl);
  const nonce = utf8Bytes(r.nonce);
  const bodies = r.resources.map((res) => {
    const name = utf8Bytes(res.name);
    const version = utf8Bytes(res.version);
    const size =
      optionalFieldSize(3, name.length) + optionalFieldSize(1, version.length) + fieldSize(2, res.any.length);
    return { name, version, any: res.any, size };
  });
  const removed = r.removed.map(utf8Bytes);
  let size = optionalFieldSize(1, sys.length) + optionalFieldSize(4, type.length) + optionalFieldSize(5, nonce.length);
  for (const b of bodies) size += fieldSize(2, b.size);
  for (const n of removed) size += fieldSize(6, n.length);
  const w = new WireWriter(size, size >= shareFromBytes).optionalBytes(1, sys);
  // Resource fields in field-number order: version (1), resource (2), name (3).
  for (const b of bodies) w.open(2, b.size).optionalBytes(1, b.version).part(2, b.any).optionalBytes(3, b.name);
  w.optionalBytes(4, type).optionalBytes(5, nonce);
  for (const n of removed) w.bytes(6, n);
  const out = w.finish();
  return Buffer.from(out.buffer, out.byteOffset, out.byteLength);
}
