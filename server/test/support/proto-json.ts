/**
 * Strict proto3 JSON (what an Envoy YAML config is) → an encoded message,
 * over the protobufjs reflection of Envoy's protos. Unlike protobufjs's
 * fromObject, an unknown field, an unknown enum name or an Any of an unknown
 * type is an error with its path, as it is for Envoy. Handles the JSON forms
 * of Any (`@type`), Duration ("1.5s"), Struct/Value, and the wrapper types.
 */
import protobuf from 'protobufjs';
import { anyType } from './envoy-protos.js';

export interface JsonError {
  readonly path: string;
  readonly message: string;
}

type Obj = Record<string, unknown>;

const WRAPPERS = new Set(
  ['Double', 'Float', 'Int64', 'UInt64', 'Int32', 'UInt32', 'Bool', 'String', 'Bytes'].map(
    (w) => `google.protobuf.${w}Value`,
  ),
);

export function encodeProtoJson(type: protobuf.Type, json: unknown): { bytes?: Uint8Array; errors: JsonError[] } {
  const errors: JsonError[] = [];
  const obj = message(type, json, '', errors);
  if (errors.length > 0) return { errors };
  return { bytes: type.encode(type.fromObject(obj as Obj)).finish(), errors };
}

function camel(name: string): string {
  return name.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());
}

function join(path: string, key: string): string {
  return path ? `${path}.${key}` : key;
}

function isObj(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function message(type: protobuf.Type, json: unknown, path: string, errors: JsonError[]): unknown {
  const full = type.fullName.slice(1);
  if (full === 'google.protobuf.Any') return anyJson(json, path, errors);
  if (full === 'google.protobuf.Duration') return duration(json, path, errors);
  if (full === 'google.protobuf.Struct') return struct(json, path, errors);
  if (full === 'google.protobuf.Value') return value(json);
  if (WRAPPERS.has(full)) return { value: scalar(type.fields['value']!, json, join(path, 'value'), errors) };
  if (!isObj(json)) return void errors.push({ path, message: `must be an object (${full})` });
  const out: Obj = {};
  const byName = new Map<string, protobuf.Field>();
  for (const f of type.fieldsArray) {
    byName.set(f.name, f);
    byName.set(camel(f.name), f);
  }
  for (const [k, v] of Object.entries(json)) {
    const f = byName.get(k);
    const p = join(path, k);
    if (!f) {
      errors.push({ path: p, message: `unknown field of ${full}` });
      continue;
    }
    f.resolve();
    if (v === null) continue;
    out[f.name] = field(f, v, p, errors);
  }
  for (const oneof of type.oneofsArray) {
    const set = oneof.fieldsArray.filter((f) => out[f.name] !== undefined);
    if (set.length > 1)
      errors.push({ path: join(path, oneof.name), message: `more than one of ${set.map((f) => f.name).join(', ')}` });
  }
  return out;
}

function field(f: protobuf.Field, v: unknown, path: string, errors: JsonError[]): unknown {
  if (f instanceof protobuf.MapField) {
    if (!isObj(v)) return void errors.push({ path, message: 'must be an object (a map)' });
    const out: Obj = {};
    for (const [k, x] of Object.entries(v))
      out[k] = single(f as unknown as protobuf.Field, x, `${path}[${JSON.stringify(k)}]`, errors);
    return out;
  }
  if (f.repeated) {
    if (!Array.isArray(v)) return void errors.push({ path, message: 'must be a list' });
    return v.map((x, i) => single(f, x, `${path}[${i}]`, errors));
  }
  return single(f, v, path, errors);
}

function single(f: protobuf.Field, v: unknown, path: string, errors: JsonError[]): unknown {
  const t = f.resolvedType;
  if (t instanceof protobuf.Type) return message(t, v, path, errors);
  if (t instanceof protobuf.Enum) {
    if (typeof v === 'number' && t.valuesById[v] !== undefined) return v;
    if (typeof v === 'string' && t.values[v] !== undefined) return t.values[v];
    return void errors.push({ path, message: `${JSON.stringify(v)} is not a value of ${t.name}` });
  }
  return scalar(f, v, path, errors);
}

function scalar(f: protobuf.Field, v: unknown, path: string, errors: JsonError[]): unknown {
  switch (f.type) {
    case 'string':
      return typeof v === 'string' ? v : void errors.push({ path, message: 'must be a string' });
    case 'bool':
      return typeof v === 'boolean' ? v : void errors.push({ path, message: 'must be true or false' });
    case 'bytes':
      return typeof v === 'string' ? Buffer.from(v, 'base64') : void errors.push({ path, message: 'must be base64' });
    default: {
      const n = typeof v === 'string' && v.trim() !== '' ? Number(v) : v;
      if (typeof n !== 'number' || Number.isNaN(n))
        return void errors.push({ path, message: `must be a number (${f.type})` });
      if (/int|fixed/.test(f.type) && !Number.isInteger(n))
        return void errors.push({ path, message: 'must be an integer' });
      if (/^(uint|fixed)/.test(f.type) && n < 0) return void errors.push({ path, message: 'must not be negative' });
      return n;
    }
  }
}

function anyJson(json: unknown, path: string, errors: JsonError[]): unknown {
  if (!isObj(json) || typeof json['@type'] !== 'string')
    return void errors.push({ path, message: 'an Any needs "@type"' });
  const url = json['@type'];
  const type = anyType(url);
  if (!type) return void errors.push({ path: join(path, '@type'), message: `unknown type ${url}` });
  const { '@type': _, ...rest } = json;
  const wkt = type.fullName.startsWith('.google.protobuf.') && 'value' in rest;
  const inner = message(type, wkt ? rest['value'] : rest, path, errors);
  if (inner === undefined) return undefined;
  return { type_url: url, value: type.encode(type.fromObject(inner as Obj)).finish() };
}

function duration(json: unknown, path: string, errors: JsonError[]): unknown {
  const m = typeof json === 'string' ? /^(-?\d+)(?:\.(\d{1,9}))?s$/.exec(json) : null;
  if (!m) return void errors.push({ path, message: `must be a duration like "1.5s", got ${JSON.stringify(json)}` });
  return { seconds: Number(m[1]), nanos: Number((m[2] ?? '').padEnd(9, '0')) };
}

function struct(json: unknown, path: string, errors: JsonError[]): unknown {
  if (!isObj(json)) return void errors.push({ path, message: 'must be an object (Struct)' });
  const fields: Obj = {};
  for (const [k, v] of Object.entries(json)) fields[k] = value(v);
  return { fields };
}

function value(v: unknown): Obj {
  if (v === null) return { nullValue: 0 };
  if (typeof v === 'number') return { numberValue: v };
  if (typeof v === 'string') return { stringValue: v };
  if (typeof v === 'boolean') return { boolValue: v };
  if (Array.isArray(v)) return { listValue: { values: v.map(value) } };
  const fields: Obj = {};
  for (const [k, x] of Object.entries(v as Obj)) fields[k] = value(x);
  return { structValue: { fields } };
}
