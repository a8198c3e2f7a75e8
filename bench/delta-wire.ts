/**
 * What the bench's Envoy-like LEDS client reads and writes on a delta ADS
 * stream, as a field scan over the wire (no protobuf runtime in the client's
 * hot path): DeltaDiscoveryRequests out; from DeltaDiscoveryResponses the type
 * and nonce to ACK, and from a ClusterLoadAssignment the LEDS collection names
 * to subscribe to. Pure.
 */
import { fieldSize, optionalFieldSize, utf8Bytes, WireWriter } from '../server/src/wire/wire.js';

export const DELTA_ADS_PATH = '/envoy.service.discovery.v3.AggregatedDiscoveryService/DeltaAggregatedResources';

/** Calls `each(field, wireType, start, end)` for every field of the message in buf[from, to); the body is [start, end). */
export function scanFields(
  buf: Uint8Array,
  from: number,
  to: number,
  each: (field: number, wire: number, start: number, end: number) => void,
): void {
  let pos = from;
  const varint = (): number => {
    let n = 0;
    let mul = 1;
    for (;;) {
      if (pos >= to) throw new Error('truncated varint');
      const b = buf[pos++] as number;
      n += (b & 0x7f) * mul;
      if (b < 0x80) return n;
      mul *= 128;
    }
  };
  while (pos < to) {
    const tag = varint();
    const field = Math.floor(tag / 8);
    const wire = tag & 7;
    let start = pos;
    if (wire === 0) varint();
    else if (wire === 2) {
      const len = varint();
      start = pos;
      pos += len;
    } else if (wire === 5) pos += 4;
    else if (wire === 1) pos += 8;
    else throw new Error(`unexpected wire type ${wire} (field ${field})`);
    if (pos > to) throw new Error(`field ${field} runs past its message`);
    each(field, wire, start, pos);
  }
}

const text = (buf: Uint8Array, start: number, end: number): string =>
  Buffer.from(buf.buffer, buf.byteOffset + start, end - start).toString('utf8');

export interface DeltaResponseHead {
  readonly typeUrl: string;
  readonly nonce: string;
  /** [start, end) of each Resource.resource (an Any) in the buffer. */
  readonly anys: readonly (readonly [number, number])[];
}

/** DeltaDiscoveryResponse: type_url (4), nonce (5), and where each resources[].resource Any is. */
export function deltaResponseHead(buf: Uint8Array): DeltaResponseHead {
  let typeUrl = '';
  let nonce = '';
  const anys: [number, number][] = [];
  scanFields(buf, 0, buf.length, (field, wire, start, end) => {
    if (wire !== 2) return;
    if (field === 4) typeUrl = text(buf, start, end);
    else if (field === 5) nonce = text(buf, start, end);
    else if (field === 2) {
      scanFields(buf, start, end, (f, w, s, e) => {
        if (f === 2 && w === 2) anys.push([s, e]);
      });
    }
  });
  return { typeUrl, nonce, anys };
}

/** The Any's value (field 2). */
export function anyValue(buf: Uint8Array, start: number, end: number): [number, number] | undefined {
  let out: [number, number] | undefined;
  scanFields(buf, start, end, (f, w, s, e) => {
    if (f === 2 && w === 2) out = [s, e];
  });
  return out;
}

/**
 * The leds_collection_name of every ClusterLoadAssignment.endpoints[] entry
 * that has one: endpoints (2) → leds_cluster_locality_config (8) →
 * leds_collection_name (2). Entries with lb_endpoints have none.
 */
export function ledsCollections(buf: Uint8Array, start = 0, end = buf.length): string[] {
  const names: string[] = [];
  scanFields(buf, start, end, (f, w, s, e) => {
    if (f !== 2 || w !== 2) return;
    scanFields(buf, s, e, (f2, w2, s2, e2) => {
      if (f2 !== 8 || w2 !== 2) return;
      scanFields(buf, s2, e2, (f3, w3, s3, e3) => {
        if (f3 === 2 && w3 === 2) names.push(text(buf, s3, e3));
      });
    });
  });
  return names;
}

/** Every LEDS collection named by the CLAs in one delta response. */
export function collectionsInResponse(buf: Uint8Array, head: DeltaResponseHead): string[] {
  const out: string[] = [];
  for (const [s, e] of head.anys) {
    const value = anyValue(buf, s, e);
    if (value) out.push(...ledsCollections(buf, value[0], value[1]));
  }
  return out;
}

export interface DeltaRequestSpec {
  readonly typeUrl: string;
  readonly subscribe?: readonly string[];
  readonly nonce?: string;
  /** Sent on a stream's first request only. */
  readonly node?: { id: string; userAgent: string; region: string; zone: string; subzone: string };
}

/** DeltaDiscoveryRequest: node (1), type_url (2), resource_names_subscribe (3), response_nonce (6). */
export function deltaRequest(spec: DeltaRequestSpec): Buffer {
  const type = utf8Bytes(spec.typeUrl);
  const names = (spec.subscribe ?? []).map(utf8Bytes);
  const nonce = utf8Bytes(spec.nonce ?? '');
  const node = spec.node ? encodeNode(spec.node) : undefined;
  let size = (node ? fieldSize(1, node.length) : 0) + fieldSize(2, type.length) + optionalFieldSize(6, nonce.length);
  for (const n of names) size += fieldSize(3, n.length);
  const w = new WireWriter(size);
  if (node) w.bytes(1, node);
  w.bytes(2, type);
  for (const n of names) w.bytes(3, n);
  const out = w.optionalBytes(6, nonce).finish();
  return Buffer.from(out.buffer, out.byteOffset, out.byteLength);
}

/** Node: id (1), locality (4: region 1, zone 2, sub_zone 3), user_agent_name (6). */
export function encodeNode(n: {
  id: string;
  userAgent?: string;
  region: string;
  zone: string;
  subzone: string;
}): Uint8Array {
  const id = utf8Bytes(n.id);
  const agent = utf8Bytes(n.userAgent ?? '');
  const [r, z, s] = [n.region, n.zone, n.subzone].map(utf8Bytes) as [Uint8Array, Uint8Array, Uint8Array];
  const loc = optionalFieldSize(1, r.length) + optionalFieldSize(2, z.length) + optionalFieldSize(3, s.length);
  return new WireWriter(fieldSize(1, id.length) + fieldSize(4, loc) + optionalFieldSize(6, agent.length))
    .bytes(1, id)
    .open(4, loc)
    .optionalBytes(1, r)
    .optionalBytes(2, z)
    .optionalBytes(3, s)
    .optionalBytes(6, agent)
    .finish();
}
