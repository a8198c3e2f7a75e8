/**
 * LEDS names (Envoy's locality endpoint discovery): one xDS collection per
 * locality-tree leaf of a service, one member per endpoint.
 *
 *   collection  xdstp://canopy/envoy.config.endpoint.v3.LbEndpoint/<service>/<leaf…>/*
 *   member      xdstp://canopy/envoy.config.endpoint.v3.LbEndpoint/<service>/<leaf…>/<address>:<port>
 *
 * `<leaf…>` is the endpoint's scope values in the service's routingPreference
 * order, then its region, zone and subzone values that are not scopes, so a
 * collection never spans two Envoy localities. Every segment keeps
 * [A-Za-z0-9._-] and writes any other UTF-8 byte as `!` and two lower-case hex
 * digits; an empty segment is a lone `!`, and a segment of dots has its dots
 * escaped (no `.` or `..` path segment). Envoy's xdstp encoder percent-encodes
 * in an id path any byte below ' ', from '~' up, and `%:?#[]`: none of those
 * is in a collection name, so the name Envoy subscribes to is the CLA's, byte
 * for byte (with `~` as the mark, Envoy 1.40 asked for `%7E` and the
 * collection was never answered). Its glob matching (last segment replaced by
 * `*`) then finds the collection. The member's address is escaped the same
 * way except that `:` is kept (the glob never holds it). Pure.
 */
export { leafPathOf } from '../../domain/leds-structure.js';

export const LEDS_AUTHORITY = 'canopy';
export const LEDS_RESOURCE_TYPE = 'envoy.config.endpoint.v3.LbEndpoint';
export const LEDS_PREFIX = `xdstp://${LEDS_AUTHORITY}/${LEDS_RESOURCE_TYPE}/`;

/** The escape mark: a character Envoy's xdstp encoder leaves as it is (see above). */
const MARK = '!';
const PLAIN = /^[A-Za-z0-9._-]$/;
const PLAIN_SEGMENT = /^[A-Za-z0-9._-]+$/;
const ALL_DOTS = /^\.+$/;
const encoder = new TextEncoder();

/** One path segment, escaped; `keep` lists extra characters kept as they are (':' in addresses). */
export function escapeSegment(value: string, keep = ''): string {
  if (value === '') return MARK;
  if (PLAIN_SEGMENT.test(value) && !ALL_DOTS.test(value)) return value;
  if (ALL_DOTS.test(value)) return `${MARK}2e`.repeat(value.length);
  let out = '';
  for (const ch of value) {
    if (PLAIN.test(ch) || keep.includes(ch)) out += ch;
    else for (const b of encoder.encode(ch)) out += `${MARK}${b.toString(16).padStart(2, '0')}`;
  }
  return out;
}

/** The inverse of escapeSegment; undefined for text no escaped segment can be. */
export function unescapeSegment(text: string): string | undefined {
  if (text === MARK) return '';
  if (!text.includes(MARK)) return text;
  const bytes: number[] = [];
  for (let i = 0; i < text.length;) {
    const ch = text[i]!;
    if (ch === MARK) {
      const hex = text.slice(i + 1, i + 3);
      if (!/^[0-9a-f]{2}$/.test(hex)) return undefined;
      bytes.push(parseInt(hex, 16));
      i += 3;
    } else {
      bytes.push(...encoder.encode(ch));
      i++;
    }
  }
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(Uint8Array.from(bytes));
  } catch {
    return undefined;
  }
}

/** `<service>/<leaf…>/`: what a collection's glob and its members' names share after the prefix. */
export function collectionStem(service: string, leaf: readonly string[]): string {
  return `${LEDS_PREFIX}${escapeSegment(service)}/${leaf.map((v) => escapeSegment(v)).join('/')}/`;
}

export function collectionName(service: string, leaf: readonly string[]): string {
  return `${collectionStem(service, leaf)}*`;
}

export function memberName(stem: string, address: string, port: number): string {
  return `${stem}${escapeSegment(address, ':')}:${port}`;
}

export interface ParsedLedsName {
  readonly service: string;
  readonly leaf: readonly string[];
  /** Absent for a collection (glob) name. */
  readonly member?: { readonly address: string; readonly port: number };
}

/** Reads a LEDS name back; undefined when it is not one Canopy makes. */
export function parseLedsName(name: string): ParsedLedsName | undefined {
  if (!name.startsWith(LEDS_PREFIX)) return undefined;
  const parts = name.slice(LEDS_PREFIX.length).split('/');
  if (parts.length < 3) return undefined;
  const decoded = parts.slice(0, -1).map(unescapeSegment);
  if (decoded.some((d) => d === undefined)) return undefined;
  const [service, ...leaf] = decoded as string[];
  const last = parts[parts.length - 1]!;
  if (last === '*') return { service: service!, leaf };
  const m = /^(.*):([0-9]{1,5})$/.exec(last);
  const address = m ? unescapeSegment(m[1]!) : undefined;
  if (!m || address === undefined) return undefined;
  return { service: service!, leaf, member: { address, port: Number(m[2]) } };
}

/** The glob a member name belongs to (its last segment replaced by `*`), as Envoy's watch map derives it. */
export function globOf(name: string): string | undefined {
  if (!name.startsWith(LEDS_PREFIX)) return undefined;
  const slash = name.lastIndexOf('/');
  return `${name.slice(0, slash + 1)}*`;
}

export function isCollectionName(name: string): boolean {
  return name.startsWith(LEDS_PREFIX) && name.endsWith('/*');
}
