/**
 * A generic protoc-gen-validate check: walks a decoded message against the
 * `validate.rules` annotations in Envoy's own protos, so it covers every
 * field Envoy constrains, including those nobody thought of. What Envoy does
 * on receipt (MessageUtil::validate) is what this mirrors:
 * - field rules: string/bytes lengths, patterns, prefixes, well-known formats;
 *   numeric const/gt/gte/lt/lte/in/not_in; enum defined_only/in/not_in;
 *   repeated min/max/unique/items; map min/max pairs, keys, values;
 *   message required/skip; Any required/in/not_in; Duration and Timestamp
 *   bounds; the scalar rules on wrapper types (UInt32Value, …);
 * - `(validate.required)` on oneofs, `(validate.disabled)` on messages;
 * - recursion into every set sub-message, Anys unpacked by their type URL
 *   (an Any of a type that is not loaded is itself an error: it cannot be
 *   checked, so it cannot be passed).
 * Errors carry the field path (`filter_chains[0].filters[0].typed_config.stat_prefix`).
 */
import { isIP } from 'node:net';
import protobuf from 'protobufjs';
import { anyType, envoyType } from './envoy-protos.js';

export interface PgvError {
  readonly path: string;
  readonly message: string;
}

type Rules = Record<string, unknown>;
type Msg = Record<string, unknown>;

/** Decodes `bytes` as `typeName` (full name, or an Any type URL) and validates it. */
export function pgvCheckBytes(typeName: string, bytes: Uint8Array): PgvError[] {
  const type = typeName.includes('/') ? anyType(typeName) : envoyType(typeName);
  if (!type) return [{ path: '', message: `type ${typeName} is not loaded` }];
  let msg: protobuf.Message;
  try {
    msg = type.decode(bytes);
  } catch (e) {
    return [{ path: '', message: `does not decode as ${type.fullName}: ${(e as Error).message}` }];
  }
  return pgvCheck(type, msg as unknown as Msg);
}

/** Validates a message decoded by protobufjs (`type.decode`, so presence is own-property-ness). */
export function pgvCheck(type: protobuf.Type, msg: Msg, path = ''): PgvError[] {
  const errors: PgvError[] = [];
  walkMessage(type, msg, path, errors);
  return errors;
}

const WRAPPERS: Record<string, string> = {
  'google.protobuf.DoubleValue': 'double',
  'google.protobuf.FloatValue': 'float',
  'google.protobuf.Int64Value': 'int64',
  'google.protobuf.UInt64Value': 'uint64',
  'google.protobuf.Int32Value': 'int32',
  'google.protobuf.UInt32Value': 'uint32',
  'google.protobuf.BoolValue': 'bool',
  'google.protobuf.StringValue': 'string',
  'google.protobuf.BytesValue': 'bytes',
};

function has(msg: Msg, key: string): boolean {
  return Object.prototype.hasOwnProperty.call(msg, key) && msg[key] !== null && msg[key] !== undefined;
}

function join(path: string, key: string): string {
  return path ? `${path}.${key}` : key;
}

/** All `(name)` options of an element, deep-merged (an option may be split over several statements). */
function option(el: protobuf.ReflectionObject, name: string): Rules | undefined {
  let out: Rules | undefined;
  for (const o of (el.parsedOptions ?? []) as Rules[]) {
    const v = (o as Rules)[name];
    if (v === undefined) continue;
    if (typeof v !== 'object' || v === null) return { value: v };
    out = merge(out ?? {}, v as Rules);
  }
  return out;
}

function merge(a: Rules, b: Rules): Rules {
  const out: Rules = { ...a };
  for (const [k, v] of Object.entries(b)) {
    const prev = out[k];
    out[k] =
      typeof v === 'object' && v !== null && !Array.isArray(v) && typeof prev === 'object' && prev !== null
        ? merge(prev as Rules, v as Rules)
        : v;
  }
  return out;
}

function walkMessage(type: protobuf.Type, msg: Msg, path: string, errors: PgvError[]): void {
  const disabled = type.options?.['(validate.disabled)'] === true || type.options?.['(validate.ignored)'] === true;
  if (disabled) return;
  if (type.fullName === '.google.protobuf.Any') return walkAny(msg, path, errors);
  for (const oneof of type.oneofsArray as protobuf.OneOf[]) {
    if (oneof.options?.['(validate.required)'] === true && !oneof.fieldsArray.some((f) => has(msg, f.name)))
      errors.push({ path: join(path, oneof.name), message: `exactly one of ${oneof.oneof.join(', ')} is required` });
  }
  for (const field of type.fieldsArray) {
    field.resolve();
    const rules = option(field, '(validate.rules)') ?? {};
    walkField(field, rules, msg, join(path, field.name), errors);
  }
}

function walkField(field: protobuf.Field, rules: Rules, msg: Msg, path: string, errors: PgvError[]): void {
  const present = has(msg, field.name);
  const value = msg[field.name];
  if (field instanceof protobuf.MapField) {
    const map = (present ? value : {}) as Record<string, unknown>;
    return checkMap(field, rules['map'] as Rules | undefined, map, path, errors);
  }
  if (field.repeated) {
    const list = (present ? value : []) as unknown[];
    const r = rules['repeated'] as Rules | undefined;
    if (r) checkRepeated(r, list, path, errors);
    const itemRules = (r?.['items'] as Rules | undefined) ?? rules;
    list.forEach((item, i) => walkValue(field, r?.['items'] ? itemRules : {}, item, true, `${path}[${i}]`, errors));
    return;
  }
  // A member of a oneof, or a message, is only checked when set (PGV skips unset oneof members).
  if (!present && field.partOf) return;
  if (!present && field.resolvedType instanceof protobuf.Type) {
    if (requiredMessage(rules)) errors.push({ path, message: 'is required' });
    return;
  }
  walkValue(field, rules, present ? value : field.typeDefault, present, path, errors);
}

function requiredMessage(rules: Rules): boolean {
  for (const kind of ['message', 'any', 'duration', 'timestamp']) {
    if ((rules[kind] as Rules | undefined)?.['required'] === true) return true;
  }
  return false;
}

function walkValue(
  field: protobuf.Field,
  rules: Rules,
  value: unknown,
  present: boolean,
  path: string,
  errors: PgvError[],
): void {
  const t = field.resolvedType;
  if (t instanceof protobuf.Enum) return checkEnum(t, rules['enum'] as Rules | undefined, Number(value), path, errors);
  if (t instanceof protobuf.Type) {
    if (!present) return;
    const m = value as Msg;
    const full = t.fullName.slice(1);
    const wrapped = WRAPPERS[full];
    if (wrapped) {
      const r = rules[wrapped] as Rules | undefined;
      if (r) checkScalar(wrapped, r, has(m, 'value') ? m['value'] : defaultOf(wrapped), join(path, 'value'), errors);
      return;
    }
    if (full === 'google.protobuf.Duration') checkTime(rules['duration'] as Rules | undefined, m, path, errors);
    if (full === 'google.protobuf.Timestamp') checkTime(rules['timestamp'] as Rules | undefined, m, path, errors);
    if (full === 'google.protobuf.Any') checkAnyRules(rules['any'] as Rules | undefined, m, path, errors);
    if ((rules['message'] as Rules | undefined)?.['skip'] === true) return;
    return walkMessage(t, m, path, errors);
  }
  const r = rules[field.type] as Rules | undefined;
  if (r) checkScalar(field.type, r, value, path, errors);
}

function defaultOf(kind: string): unknown {
  if (kind === 'string') return '';
  if (kind === 'bytes') return new Uint8Array();
  if (kind === 'bool') return false;
  return 0;
}

function walkAny(msg: Msg, path: string, errors: PgvError[]): void {
  const url = typeof msg['type_url'] === 'string' ? msg['type_url'] : '';
  if (!url) return void errors.push({ path: join(path, 'type_url'), message: 'an Any without a type URL' });
  const type = anyType(url);
  if (!type) return void errors.push({ path, message: `cannot validate an Any of type ${url}: type not loaded` });
  let inner: protobuf.Message;
  try {
    inner = type.decode((msg['value'] as Uint8Array | undefined) ?? new Uint8Array());
  } catch (e) {
    return void errors.push({ path, message: `Any of ${url} does not decode: ${(e as Error).message}` });
  }
  walkMessage(type, inner as unknown as Msg, path, errors);
}

function checkAnyRules(r: Rules | undefined, m: Msg, path: string, errors: PgvError[]): void {
  if (!r) return;
  const url = String(m['type_url'] ?? '');
  const inList = list(r['in']) as string[] | undefined;
  const notIn = list(r['not_in']) as string[] | undefined;
  if (inList && !inList.includes(url))
    errors.push({ path, message: `type URL ${url} is not one of ${inList.join(', ')}` });
  if (notIn?.includes(url)) errors.push({ path, message: `type URL ${url} is not allowed` });
}

function checkEnum(e: protobuf.Enum, r: Rules | undefined, v: number, path: string, errors: PgvError[]): void {
  if (!r) return;
  if (r['defined_only'] === true && e.valuesById[v] === undefined)
    errors.push({ path, message: `${v} is not a defined value of ${e.name}` });
  numberSet(r, v, path, errors);
}

function checkRepeated(r: Rules, list: unknown[], path: string, errors: PgvError[]): void {
  if (r['ignore_empty'] === true && list.length === 0) return;
  const min = num(r['min_items']);
  const max = num(r['max_items']);
  if (min !== undefined && list.length < min)
    errors.push({ path, message: `needs at least ${min} items, has ${list.length}` });
  if (max !== undefined && list.length > max)
    errors.push({ path, message: `allows at most ${max} items, has ${list.length}` });
  if (r['unique'] === true) {
    const seen = new Set(list.map((x) => (x instanceof Uint8Array ? Buffer.from(x).toString('hex') : String(x))));
    if (seen.size !== list.length) errors.push({ path, message: 'items must be unique' });
  }
}

function checkMap(
  field: protobuf.MapField,
  r: Rules | undefined,
  map: Record<string, unknown>,
  path: string,
  errors: PgvError[],
): void {
  const keys = Object.keys(map);
  if (r && !(r['ignore_empty'] === true && keys.length === 0)) {
    const min = num(r['min_pairs']);
    const max = num(r['max_pairs']);
    if (min !== undefined && keys.length < min) errors.push({ path, message: `needs at least ${min} entries` });
    if (max !== undefined && keys.length > max) errors.push({ path, message: `allows at most ${max} entries` });
  }
  const keyRules = r?.['keys'] as Rules | undefined;
  const valueRules = (r?.['values'] as Rules | undefined) ?? {};
  for (const k of keys) {
    const p = `${path}[${JSON.stringify(k)}]`;
    const kr = keyRules?.[field.keyType] as Rules | undefined;
    if (kr) checkScalar(field.keyType, kr, field.keyType === 'string' ? k : Number(k), p, errors);
    walkValue(field as unknown as protobuf.Field, valueRules, map[k], true, p, errors);
  }
}

/** Seconds as a number, for Duration and Timestamp (and their rule values). */
function seconds(m: unknown): number {
  const o = (m ?? {}) as Msg;
  return toNumber(o['seconds'] ?? 0) + toNumber(o['nanos'] ?? 0) / 1e9;
}

function checkTime(r: Rules | undefined, m: Msg, path: string, errors: PgvError[]): void {
  if (!r) return;
  const s = seconds(m);
  if (m['nanos'] !== undefined && Math.abs(toNumber(m['nanos'])) > 999_999_999)
    errors.push({ path, message: 'nanos out of range' });
  const bound = (k: string) => (r[k] === undefined ? undefined : seconds(r[k]));
  compare(
    s,
    { const: bound('const'), lt: bound('lt'), lte: bound('lte'), gt: bound('gt'), gte: bound('gte') },
    path,
    errors,
    's',
  );
  const inList = list(r['in']) as unknown[] | undefined;
  if (inList && !inList.map(seconds).includes(s)) errors.push({ path, message: `${s}s is not an allowed duration` });
}

interface Bounds {
  const?: number | undefined;
  lt?: number | undefined;
  lte?: number | undefined;
  gt?: number | undefined;
  gte?: number | undefined;
}

function compare(v: number, b: Bounds, path: string, errors: PgvError[], unit = ''): void {
  const show = (x: number) => `${x}${unit}`;
  if (b.const !== undefined && v !== b.const)
    errors.push({ path, message: `must equal ${show(b.const)}, got ${show(v)}` });
  // PGV: lt < gt (or lte/gte) means "outside the range" — an exclusive range.
  const lo = b.gt ?? b.gte;
  const hi = b.lt ?? b.lte;
  const aboveLo = lo === undefined || (b.gt !== undefined ? v > b.gt : v >= (b.gte as number));
  const belowHi = hi === undefined || (b.lt !== undefined ? v < b.lt : v <= (b.lte as number));
  const ok = lo !== undefined && hi !== undefined && hi < lo ? aboveLo || belowHi : aboveLo && belowHi;
  if (!ok) {
    const parts: string[] = [];
    if (b.gt !== undefined) parts.push(`> ${show(b.gt)}`);
    if (b.gte !== undefined) parts.push(`>= ${show(b.gte)}`);
    if (b.lt !== undefined) parts.push(`< ${show(b.lt)}`);
    if (b.lte !== undefined) parts.push(`<= ${show(b.lte)}`);
    errors.push({ path, message: `must be ${parts.join(' and ')}, got ${show(v)}` });
  }
}

function numberSet(r: Rules, v: number, path: string, errors: PgvError[]): void {
  const inList = list(r['in']) as unknown[] | undefined;
  const notIn = list(r['not_in']) as unknown[] | undefined;
  if (inList && !inList.map(toNumber).includes(v))
    errors.push({ path, message: `${v} is not one of ${inList.join(', ')}` });
  if (notIn?.map(toNumber).includes(v)) errors.push({ path, message: `${v} is not allowed` });
}

function checkScalar(kind: string, r: Rules, value: unknown, path: string, errors: PgvError[]): void {
  if (kind === 'string') return checkString(r, String(value ?? ''), path, errors);
  if (kind === 'bytes') return checkBytes(r, (value as Uint8Array | undefined) ?? new Uint8Array(), path, errors);
  if (kind === 'bool') {
    if (r['const'] !== undefined && value !== r['const'])
      errors.push({ path, message: `must be ${String(r['const'])}` });
    return;
  }
  const v = toNumber(value ?? 0);
  if (r['ignore_empty'] === true && v === 0) return;
  compare(
    v,
    { const: num(r['const']), lt: num(r['lt']), lte: num(r['lte']), gt: num(r['gt']), gte: num(r['gte']) },
    path,
    errors,
  );
  numberSet(r, v, path, errors);
}

const HEADER_NAME = /^:?[0-9a-zA-Z!#$%&'*+\-.^_|~`]+$/;
const HEADER_VALUE = /^[^\u0000-\u0008\u000A-\u001F\u007F]*$/;
const LOOSE_HEADER = /^[^\u0000\u000A\u000D]*$/;
const HOSTNAME =
  /^(?=.{1,253}$)([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?$/;

function checkString(r: Rules, s: string, path: string, errors: PgvError[]): void {
  if (r['ignore_empty'] === true && s === '') return;
  const chars = [...s].length;
  const bytes = Buffer.byteLength(s);
  const bound = (k: string, ok: (n: number) => boolean, what: string) => {
    const n = num(r[k]);
    if (n !== undefined && !ok(n)) errors.push({ path, message: `${what} ${n}, got ${JSON.stringify(s)}` });
  };
  bound('len', (n) => chars === n, 'must have exactly this many characters:');
  bound('min_len', (n) => chars >= n, 'must have at least this many characters:');
  bound('max_len', (n) => chars <= n, 'must have at most this many characters:');
  bound('len_bytes', (n) => bytes === n, 'must have exactly this many bytes:');
  bound('min_bytes', (n) => bytes >= n, 'must have at least this many bytes:');
  bound('max_bytes', (n) => bytes <= n, 'must have at most this many bytes:');
  const text = (k: string, ok: (x: string) => boolean, what: string) => {
    const x = r[k];
    if (typeof x === 'string' && !ok(x))
      errors.push({ path, message: `${what} ${JSON.stringify(x)}, got ${JSON.stringify(s)}` });
  };
  text('const', (x) => s === x, 'must equal');
  text('prefix', (x) => s.startsWith(x), 'must start with');
  text('suffix', (x) => s.endsWith(x), 'must end with');
  text('contains', (x) => s.includes(x), 'must contain');
  text('not_contains', (x) => !s.includes(x), 'must not contain');
  // RE2 patterns; the ones in Envoy's protos are also valid JavaScript (u flag for \p and friends).
  text('pattern', (x) => new RegExp(x, 'u').test(s), 'must match');
  const inList = list(r['in']) as string[] | undefined;
  if (inList && !inList.includes(s))
    errors.push({ path, message: `${JSON.stringify(s)} is not one of ${inList.join(', ')}` });
  if ((list(r['not_in']) as string[] | undefined)?.includes(s))
    errors.push({ path, message: `${JSON.stringify(s)} is not allowed` });
  const wellKnown = (ok: boolean, what: string) => {
    if (!ok) errors.push({ path, message: `must be ${what}, got ${JSON.stringify(s)}` });
  };
  if (r['ip'] === true) wellKnown(isIP(s) !== 0, 'an IP address');
  if (r['ipv4'] === true) wellKnown(isIP(s) === 4, 'an IPv4 address');
  if (r['ipv6'] === true) wellKnown(isIP(s) === 6, 'an IPv6 address');
  if (r['hostname'] === true) wellKnown(HOSTNAME.test(s), 'a hostname');
  if (r['address'] === true) wellKnown(isIP(s) !== 0 || HOSTNAME.test(s), 'an IP address or hostname');
  if (r['uri'] === true) wellKnown(URL.canParse(s), 'an absolute URI');
  const regex = r['well_known_regex'];
  if (regex === 'HTTP_HEADER_NAME' || regex === 1) {
    wellKnown((r['strict'] === false ? LOOSE_HEADER : HEADER_NAME).test(s), 'an HTTP header name');
  }
  if (regex === 'HTTP_HEADER_VALUE' || regex === 2) {
    wellKnown((r['strict'] === false ? LOOSE_HEADER : HEADER_VALUE).test(s), 'an HTTP header value');
  }
}

function checkBytes(r: Rules, b: Uint8Array, path: string, errors: PgvError[]): void {
  if (r['ignore_empty'] === true && b.length === 0) return;
  const n = (k: string) => num(r[k]);
  const len = n('len');
  const min = n('min_len');
  const max = n('max_len');
  if (len !== undefined && b.length !== len) errors.push({ path, message: `must be ${len} bytes, got ${b.length}` });
  if (min !== undefined && b.length < min)
    errors.push({ path, message: `must be at least ${min} bytes, got ${b.length}` });
  if (max !== undefined && b.length > max)
    errors.push({ path, message: `must be at most ${max} bytes, got ${b.length}` });
}

function toNumber(v: unknown): number {
  if (typeof v === 'number') return v;
  if (typeof v === 'string') return Number(v);
  if (typeof v === 'bigint') return Number(v);
  if (v && typeof v === 'object' && 'toNumber' in v) return (v as { toNumber(): number }).toNumber();
  return Number(v);
}

/** A repeated option value: a list, or one value when the proto text gave one. */
function list(v: unknown): unknown[] | undefined {
  return v === undefined ? undefined : Array.isArray(v) ? v : [v];
}

function num(v: unknown): number | undefined {
  return v === undefined || v === null ? undefined : toNumber(v);
}
