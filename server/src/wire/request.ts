/**
 * DiscoveryRequest decoding, through protobufjs with Envoy's real protos. The
 * node is read once per stream; every ACK goes through here too.
 */
import { messageType } from './protos.js';

export interface NodeInfo {
  readonly id: string;
  readonly cluster: string;
  readonly locality: { readonly region: string; readonly zone: string; readonly subzone: string };
  readonly metadata: Readonly<Record<string, unknown>>;
  readonly userAgentName: string;
}

export interface DiscoveryRequest {
  readonly versionInfo: string;
  readonly node?: NodeInfo;
  readonly resourceNames: readonly string[];
  readonly typeUrl: string;
  readonly responseNonce: string;
  readonly errorDetail?: { readonly code: number; readonly message: string };
}

/** A delta request: subscription changes, not the full list; versions per resource on reconnect. */
export interface DeltaDiscoveryRequest {
  readonly node?: NodeInfo;
  readonly typeUrl: string;
  readonly subscribe: readonly string[];
  readonly unsubscribe: readonly string[];
  /** What the client already holds, name → version (the first request of a type on a new stream). */
  readonly initialVersions: Readonly<Record<string, string>>;
  readonly responseNonce: string;
  readonly errorDetail?: { readonly code: number; readonly message: string };
}

export interface RawNode {
  id?: string;
  cluster?: string;
  metadata?: { fields?: Record<string, StructValue> };
  locality?: { region?: string; zone?: string; sub_zone?: string };
  user_agent_name?: string;
}

interface RawRequest {
  version_info?: string;
  node?: RawNode;
  resource_names?: string[];
  type_url?: string;
  response_nonce?: string;
  error_detail?: { code?: number; message?: string };
}

/** google.protobuf.Value as protobufjs defines it: camelCase fields, even with keepCase. */
interface StructValue {
  nullValue?: unknown;
  numberValue?: number;
  stringValue?: string;
  boolValue?: boolean;
  structValue?: { fields?: Record<string, StructValue> };
  listValue?: { values?: StructValue[] };
}

interface RawDeltaRequest {
  node?: RawNode;
  type_url?: string;
  resource_names_subscribe?: string[];
  resource_names_unsubscribe?: string[];
  initial_resource_versions?: Record<string, string>;
  response_nonce?: string;
  error_detail?: { code?: number; message?: string };
}

let requestType: ReturnType<typeof messageType> | undefined;
let deltaRequestType: ReturnType<typeof messageType> | undefined;

/** At most this many names are shared (clients may name anything): past it the table starts over. */
const MAX_SHARED_NAMES = 65_536;
const sharedNames = new Map<string, string>();

/**
 * One string for a resource name however many streams name it. Each request decodes its names into fresh
 * strings, and a stream keeps the names it subscribed to (its subscriptions, its held versions, the
 * transport's count of what it holds): an Envoy LEDS stream names every collection its CLA lists, so each
 * stream kept its own copy of each (a heap snapshot at 300 LEDS streams with 1,000 collections: every glob
 * name 311 times, 28 MB of copies, about 90 KB per stream).
 */
function sharedName(name: string): string {
  const known = sharedNames.get(name);
  if (known !== undefined) return known;
  if (sharedNames.size >= MAX_SHARED_NAMES) sharedNames.clear();
  sharedNames.set(name, name);
  return name;
}

export function decodeDiscoveryRequest(buf: Uint8Array): DiscoveryRequest {
  // Most requests are ACKs (strings only): read those by hand; anything with a node or an error goes to protobufjs.
  const plain = decodePlainRequest(buf);
  if (plain) return plain;
  // Look the Type up once.
  const type = (requestType ??= messageType('envoy.service.discovery.v3.DiscoveryRequest'));
  const raw = type.toObject(type.decode(buf), { longs: Number, enums: String }) as RawRequest;
  return {
    versionInfo: raw.version_info ?? '',
    ...(raw.node ? { node: nodeInfo(raw.node) } : {}),
    resourceNames: raw.resource_names ?? [],
    typeUrl: raw.type_url ?? '',
    responseNonce: raw.response_nonce ?? '',
    ...(raw.error_detail
      ? { errorDetail: { code: raw.error_detail.code ?? 0, message: raw.error_detail.message ?? '' } }
      : {}),
  };
}

export function decodeDeltaDiscoveryRequest(buf: Uint8Array): DeltaDiscoveryRequest {
  // ACKs and subscription changes (strings only) are read by hand: a LEDS subscription names a thousand globs.
  const plain = decodePlainDeltaRequest(buf);
  if (plain) return plain;
  const type = (deltaRequestType ??= messageType('envoy.service.discovery.v3.DeltaDiscoveryRequest'));
  const raw = type.toObject(type.decode(buf), { longs: Number, enums: String }) as RawDeltaRequest;
  return {
    ...(raw.node ? { node: nodeInfo(raw.node) } : {}),
    typeUrl: raw.type_url ?? '',
    subscribe: (raw.resource_names_subscribe ?? []).map(sharedName),
    unsubscribe: (raw.resource_names_unsubscribe ?? []).map(sharedName),
    initialVersions: raw.initial_resource_versions ?? {},
    responseNonce: raw.response_nonce ?? '',
    ...(raw.error_detail
      ? { errorDetail: { code: raw.error_detail.code ?? 0, message: raw.error_detail.message ?? '' } }
      : {}),
  };
}

export function nodeInfo(n: RawNode): NodeInfo {
  return {
    id: n.id ?? '',
    cluster: n.cluster ?? '',
    locality: { region: n.locality?.region ?? '', zone: n.locality?.zone ?? '', subzone: n.locality?.sub_zone ?? '' },
    metadata: structToJson(n.metadata?.fields),
    userAgentName: n.user_agent_name ?? '',
  };
}

function structToJson(fields: Record<string, StructValue> | undefined): Record<string, unknown> {
  // fromEntries defines own properties: a key "__proto__" (a node label) stays a key.
  return Object.fromEntries(Object.entries(fields ?? {}).map(([k, v]) => [k, valueToJson(v)]));
}

function valueToJson(v: StructValue): unknown {
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.numberValue !== undefined) return v.numberValue;
  if (v.boolValue !== undefined) return v.boolValue;
  if (v.structValue !== undefined) return structToJson(v.structValue.fields);
  if (v.listValue !== undefined) return (v.listValue.values ?? []).map(valueToJson);
  return null;
}

const utf8 = new TextDecoder('utf-8');
/** Delta names as protobufjs reads them: a leading U+FEFF is kept. */
const utf8KeepBom = new TextDecoder('utf-8', { ignoreBOM: true });

/**
 * A DiscoveryRequest that carries only strings (version_info, resource_names,
 * type_url, response_nonce), read without protobufjs; undefined when any
 * other field is present, or the bytes are not well formed, so the full
 * decoder takes it (and reports what is wrong).
 */
export function decodePlainRequest(buf: Uint8Array): DiscoveryRequest | undefined {
  let versionInfo = '';
  let typeUrl = '';
  let responseNonce = '';
  const resourceNames: string[] = [];
  // Fields 1, 3, 4, 5 as length-delimited: one-byte tags 0x0a, 0x1a, 0x22, 0x2a.
  const plain = readStringFields(buf, [0x0a, 0x1a, 0x22, 0x2a], utf8, (tag, text) => {
    if (tag === 0x0a) versionInfo = text;
    else if (tag === 0x1a) resourceNames.push(text);
    else if (tag === 0x22) typeUrl = text;
    else responseNonce = text;
  });
  return plain ? { versionInfo, resourceNames, typeUrl, responseNonce } : undefined;
}

/**
 * A DeltaDiscoveryRequest carrying only type_url (2), resource_names_subscribe
 * (3), resource_names_unsubscribe (4) and response_nonce (6); undefined for
 * anything else (a node, initial versions, an error detail), left to protobufjs.
 */
export function decodePlainDeltaRequest(buf: Uint8Array): DeltaDiscoveryRequest | undefined {
  let typeUrl = '';
  let responseNonce = '';
  const subscribe: string[] = [];
  const unsubscribe: string[] = [];
  // Length-delimited fields 2, 3, 4, 6: one-byte tags 0x12, 0x1a, 0x22, 0x32.
  const plain = readStringFields(buf, [0x12, 0x1a, 0x22, 0x32], utf8KeepBom, (tag, text) => {
    if (tag === 0x12) typeUrl = text;
    else if (tag === 0x1a) subscribe.push(sharedName(text));
    else if (tag === 0x22) unsubscribe.push(sharedName(text));
    else responseNonce = text;
  });
  return plain ? { typeUrl, subscribe, unsubscribe, initialVersions: {}, responseNonce } : undefined;
}

/**
 * Reads a message made only of length-delimited string fields with these
 * one-byte tags, handing each to `take`; false when another field is present
 * or the bytes are not well formed.
 */
function readStringFields(
  buf: Uint8Array,
  tags: readonly number[],
  decoder: { decode(bytes: Uint8Array): string },
  take: (tag: number, text: string) => void,
): boolean {
  let pos = 0;
  while (pos < buf.length) {
    const tag = buf[pos++] as number;
    if (!tags.includes(tag)) return false;
    let len = 0;
    for (let shift = 0; ; shift += 7) {
      if (pos >= buf.length || shift > 28) return false;
      const b = buf[pos++] as number;
      len += (b & 0x7f) * 2 ** shift;
      if (b < 0x80) break;
    }
    if (pos + len > buf.length) return false;
    take(tag, decoder.decode(buf.subarray(pos, pos + len)));
    pos += len;
  }
  return true;
}
