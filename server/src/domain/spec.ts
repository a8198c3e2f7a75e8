/**
 * Config and admin input → the service model. Validation is data: every
 * problem is collected with the path of the field at fault; nothing throws.
 * Unknown keys are errors so that a typo (`endpionts`) is reported rather
 * than silently meaning "no endpoints".
 */
import { readValidEndpointList } from './endpoint-list.js';
import type { FieldError, ValidationResult } from './errors.js';
import { DEFAULT_SCOPES, EMPTY_LOCALITY, isScope, MAX_SCOPES, type Locality, type Scope } from './locality.js';
import {
  endpointKey,
  HEALTH_VALUES,
  LB_MODES,
  type Endpoint,
  type Health,
  type LbMode,
  type LoadBalancing,
  type ServiceSpec,
} from './service.js';

export interface ServerSettings {
  readonly host?: string;
  readonly xdsPort?: number;
  readonly adminPort?: number;
  readonly debounceMs?: number;
  /** Streams with a push in flight at once (0: no limit). */
  readonly pushWindow?: number;
}

export interface CanopyConfig {
  readonly services: readonly ServiceSpec[];
  readonly server: ServerSettings;
}

export const DEFAULT_OVERPROVISIONING = 140;
export const MAX_ENDPOINT_WEIGHT = 1_000_000;
const MAX_OVERPROVISIONING = 100_000;
const MAX_DEBOUNCE_MS = 60_000;
const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$/;

const SERVICE_KEYS = ['name', 'port', 'vip', 'loadBalancing', 'endpoints'];
const LB_KEYS = ['mode', 'routingPreference', 'crossNetworkFailover', 'overprovisioningFactor'];
const ENDPOINT_KEYS = ['address', 'port', 'locality', 'network', 'node', 'cluster', 'labels', 'health', 'weight'];
const LOCALITY_KEYS = ['region', 'zone', 'subzone'] as const;
const SERVER_KEYS = ['host', 'xdsPort', 'adminPort', 'debounceMs', 'pushWindow'];
const PATCH_KEYS = ['health', 'weight'];

type Obj = Record<string, unknown>;

export function parseConfig(input: unknown): ValidationResult<CanopyConfig> {
  const r = new Reader();
  // An empty YAML file reads as null: report the missing `services`, not "not an object".
  const o = r.object(input ?? {}, '', ['services', 'server']);
  let services: ServiceSpec[] = [];
  let server: ServerSettings = {};
  if (o) {
    services = readServices(r, o['services']);
    if (o['server'] !== undefined) server = readServer(r, o['server']);
  }
  return r.result({ services, server });
}

export function parseServiceSpec(input: unknown, path = ''): ValidationResult<ServiceSpec> {
  const r = new Reader();
  const spec = readService(r, input, path);
  return spec ? r.result(spec) : r.failed();
}

/** An admin PATCH of one endpoint's `health` and `weight`, checked by the config rules. */
export function patchEndpoint(ep: Endpoint, input: unknown): ValidationResult<Endpoint> {
  const r = new Reader();
  const o = r.object(input, '', PATCH_KEYS);
  if (!o) return r.failed();
  const health = r.optional(o, 'health', '', (x, p) => r.oneOf<Health>(x, p, HEALTH_VALUES)) ?? ep.health;
  const weight = r.optional(o, 'weight', '', (x, p) => r.int(x, p, 1, MAX_ENDPOINT_WEIGHT)) ?? ep.weight;
  return r.result({ ...ep, health, weight });
}

function readServices(r: Reader, v: unknown): ServiceSpec[] {
  if (!Array.isArray(v)) return r.fail('services', `must be a list of services, got ${describe(v)}`) ?? [];
  const services: ServiceSpec[] = [];
  const seen = new Set<string>();
  v.forEach((raw, i) => {
    const path = `services[${i}]`;
    // Checked on the raw name so a duplicate is reported even when the entry has other errors.
    const name = isObject(raw) ? raw['name'] : undefined;
    if (typeof name === 'string') {
      if (seen.has(name)) r.fail(`${path}.name`, `duplicate service name "${name}"`);
      seen.add(name);
    }
    const spec = readService(r, raw, path);
    if (spec) services.push(spec);
  });
  return services;
}

function readServer(r: Reader, v: unknown): ServerSettings {
  const o = r.object(v, 'server', SERVER_KEYS);
  if (!o) return {};
  // Port 0 asks the OS for a free port (tests, e2e).
  const port = (x: unknown, p: string) => r.int(x, p, 0, 65535);
  const host = r.optional(o, 'host', 'server', r.string);
  const xdsPort = r.optional(o, 'xdsPort', 'server', port);
  const adminPort = r.optional(o, 'adminPort', 'server', port);
  const debounceMs = r.optional(o, 'debounceMs', 'server', (x, p) => r.int(x, p, 0, MAX_DEBOUNCE_MS));
  const pushWindow = r.optional(o, 'pushWindow', 'server', (x, p) => r.int(x, p, 0, 1_000_000));
  return {
    ...(host !== undefined ? { host } : {}),
    ...(xdsPort !== undefined ? { xdsPort } : {}),
    ...(adminPort !== undefined ? { adminPort } : {}),
    ...(debounceMs !== undefined ? { debounceMs } : {}),
    ...(pushWindow !== undefined ? { pushWindow } : {}),
  };
}

function readService(r: Reader, v: unknown, path: string): ServiceSpec | undefined {
  const before = r.errors.length;
  const o = r.object(v, path, SERVICE_KEYS);
  if (!o) return undefined;
  const name = r.string(o['name'], join(path, 'name'));
  if (name !== undefined && !NAME.test(name)) {
    r.fail(
      join(path, 'name'),
      `must be 1-253 characters of A-Z a-z 0-9 . _ -, starting with a letter or digit, got ${describe(name)}`,
    );
  }
  const port = r.optional(o, 'port', path, (x, p) => r.int(x, p, 1, 65535));
  const vip = r.optional(o, 'vip', path, r.ip);
  const loadBalancing = readLoadBalancing(r, o['loadBalancing'], join(path, 'loadBalancing'));
  const endpoints = r.optional(o, 'endpoints', path, (x, p) => readEndpoints(r, x, p)) ?? [];
  if (r.errors.length > before || name === undefined) return undefined;
  return {
    name,
    ...(port !== undefined ? { port } : {}),
    ...(vip !== undefined ? { vip } : {}),
    loadBalancing,
    endpoints,
  };
}

/** Returns the defaults for anything absent or invalid; invalid input has been reported. */
function readLoadBalancing(r: Reader, v: unknown, path: string): LoadBalancing {
  const o = v === undefined ? {} : (r.object(v, path, LB_KEYS) ?? {});
  return {
    mode: r.optional(o, 'mode', path, (x, p) => r.oneOf<LbMode>(x, p, LB_MODES)) ?? 'failover',
    routingPreference: r.optional(o, 'routingPreference', path, (x, p) => readScopes(r, x, p)) ?? DEFAULT_SCOPES,
    crossNetworkFailover: r.optional(o, 'crossNetworkFailover', path, r.bool) ?? true,
    overprovisioningFactor:
      r.optional(o, 'overprovisioningFactor', path, (x, p) => r.int(x, p, 100, MAX_OVERPROVISIONING)) ??
      DEFAULT_OVERPROVISIONING,
  };
}

function readScopes(r: Reader, v: unknown, path: string): Scope[] | undefined {
  if (!Array.isArray(v)) return r.fail(path, `must be a list of scopes, got ${describe(v)}`);
  if (v.length < 1 || v.length > MAX_SCOPES)
    return r.fail(path, `must have 1 to ${MAX_SCOPES} scopes, got ${v.length}`);
  const scopes: Scope[] = [];
  v.forEach((s, i) => {
    const p = `${path}[${i}]`;
    if (!isScope(s))
      r.fail(p, `must be network, region, zone, subzone, node, cluster or label:<key>, got ${describe(s)}`);
    else if (scopes.includes(s)) r.fail(p, `duplicate scope "${s}"`);
    else scopes.push(s);
  });
  return scopes;
}

function readEndpoints(r: Reader, v: unknown, path: string): Endpoint[] | undefined {
  // A valid list takes the compiled schema's one pass; any problem is read again field by field for its path.
  const valid = readValidEndpointList(v);
  if (valid) return valid;
  if (!Array.isArray(v)) return r.fail(path, `must be a list of endpoints, got ${describe(v)}`);
  const endpoints: Endpoint[] = [];
  const seen = new Set<string>();
  v.forEach((raw, i) => {
    const p = `${path}[${i}]`;
    const ep = readEndpoint(r, raw, p);
    if (!ep) return;
    const key = endpointKey(ep);
    if (seen.has(key)) r.fail(p, `duplicate endpoint ${key} (an address:port appears once per service)`);
    seen.add(key);
    endpoints.push(ep);
  });
  return endpoints;
}

function readEndpoint(r: Reader, v: unknown, path: string): Endpoint | undefined {
  const before = r.errors.length;
  const o = r.object(v, path, ENDPOINT_KEYS);
  if (!o) return undefined;
  const text = (key: string) => r.optional(o, key, path, r.string) ?? '';
  // Placeholders stand in for missing required values; the error count keeps them from escaping.
  const endpoint: Endpoint = {
    address: r.ip(o['address'], join(path, 'address')) ?? '',
    port: r.int(o['port'], join(path, 'port'), 1, 65535) ?? 0,
    locality: r.optional(o, 'locality', path, (x, p) => readLocality(r, x, p)) ?? EMPTY_LOCALITY,
    network: text('network'),
    node: text('node'),
    cluster: text('cluster'),
    labels: r.optional(o, 'labels', path, (x, p) => readLabels(r, x, p)) ?? {},
    health: r.optional(o, 'health', path, (x, p) => r.oneOf<Health>(x, p, HEALTH_VALUES)) ?? 'healthy',
    weight: r.optional(o, 'weight', path, (x, p) => r.int(x, p, 1, MAX_ENDPOINT_WEIGHT)) ?? 1,
  };
  return r.errors.length > before ? undefined : endpoint;
}

function readLocality(r: Reader, v: unknown, path: string): Locality | undefined {
  const o = r.object(v, path, LOCALITY_KEYS);
  if (!o) return undefined;
  const [region = '', zone = '', subzone = ''] = LOCALITY_KEYS.map((k) => r.optional(o, k, path, r.string));
  return { region, zone, subzone };
}

function readLabels(r: Reader, v: unknown, path: string): Record<string, string> | undefined {
  if (!isObject(v)) return r.fail(path, `must be an object of string values, got ${describe(v)}`);
  const entries: [string, string][] = [];
  for (const [k, val] of Object.entries(v)) {
    // An empty key could never be named by a `label:<key>` scope.
    if (k === '') r.fail(path, 'label keys must be non-empty');
    else if (typeof val !== 'string') r.fail(join(path, k), `must be a string, got ${describe(val)}`);
    else entries.push([k, val]);
  }
  // fromEntries defines own properties, so a key like "__proto__" stays a label.
  return Object.fromEntries(entries);
}

/** The canonical JSON form of a spec; parseServiceSpec accepts it back unchanged. */
export function serviceSpecToJson(spec: ServiceSpec): Obj {
  const lb = spec.loadBalancing;
  return {
    name: spec.name,
    ...(spec.port !== undefined ? { port: spec.port } : {}),
    ...(spec.vip !== undefined ? { vip: spec.vip } : {}),
    loadBalancing: {
      mode: lb.mode,
      routingPreference: [...lb.routingPreference],
      crossNetworkFailover: lb.crossNetworkFailover,
      overprovisioningFactor: lb.overprovisioningFactor,
    },
    endpoints: spec.endpoints.map(endpointToJson),
  };
}

export function endpointToJson(e: Endpoint): Obj {
  return {
    address: e.address,
    port: e.port,
    locality: { region: e.locality.region, zone: e.locality.zone, subzone: e.locality.subzone },
    ...(e.network ? { network: e.network } : {}),
    ...(e.node ? { node: e.node } : {}),
    ...(e.cluster ? { cluster: e.cluster } : {}),
    labels: Object.fromEntries(Object.entries(e.labels)),
    health: e.health,
    weight: e.weight,
  };
}

/** Collects the errors found while reading one input. */
class Reader {
  readonly errors: FieldError[] = [];

  fail(path: string, message: string): undefined {
    this.errors.push({ path, message });
    return undefined;
  }

  result<T>(value: T): ValidationResult<T> {
    return this.errors.length > 0 ? this.failed() : { ok: true, value };
  }

  failed(): { ok: false; errors: readonly FieldError[] } {
    return { ok: false, errors: this.errors };
  }

  /** Reads `o[key]` when present; undefined when absent (the caller applies its default). */
  optional<T>(o: Obj, key: string, path: string, read: (v: unknown, path: string) => T | undefined): T | undefined {
    const v = o[key];
    return v === undefined ? undefined : read(v, join(path, key));
  }

  object(v: unknown, path: string, allowed: readonly string[]): Obj | undefined {
    if (!isObject(v)) return this.fail(path, `must be an object, got ${describe(v)}`);
    for (const k of Object.keys(v)) {
      if (!allowed.includes(k)) this.fail(join(path, k), `unknown field (expected one of: ${allowed.join(', ')})`);
    }
    return v;
  }

  // Arrow properties, so they can be passed to optional() as they are.
  readonly string = (v: unknown, path: string): string | undefined =>
    typeof v === 'string' ? v : this.fail(path, `must be a string, got ${describe(v)}`);

  readonly bool = (v: unknown, path: string): boolean | undefined =>
    typeof v === 'boolean' ? v : this.fail(path, `must be true or false, got ${describe(v)}`);

  readonly ip = (v: unknown, path: string): string | undefined =>
    typeof v === 'string' && isIp(v)
      ? v
      : this.fail(path, `must be an IPv4 or IPv6 address literal, got ${describe(v)}`);

  int(v: unknown, path: string, min: number, max: number): number | undefined {
    if (typeof v === 'number' && Number.isInteger(v) && v >= min && v <= max) return v;
    return this.fail(path, `must be an integer from ${min} to ${max}, got ${describe(v)}`);
  }

  oneOf<T extends string>(v: unknown, path: string, values: readonly T[]): T | undefined {
    if (typeof v === 'string' && (values as readonly string[]).includes(v)) return v as T;
    return this.fail(path, `must be one of ${values.join(', ')}, got ${describe(v)}`);
  }
}

function isObject(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function join(path: string, key: string): string {
  return path ? `${path}.${key}` : key;
}

/** The received value, briefly, for error messages. */
function describe(v: unknown): string {
  if (v === undefined) return 'nothing';
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'a list';
  if (typeof v === 'string') return JSON.stringify(v.length > 40 ? `${v.slice(0, 40)}…` : v);
  if (typeof v === 'object') return 'an object';
  return `${typeof v} ${String(v)}`;
}

const V4 = /^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$/;

/** An IPv4 dotted quad or an IPv6 literal (no zone id); pure, so no node:net. */
export function isIp(s: string): boolean {
  if (V4.test(s)) return true;
  if (!s.includes(':') || !/^[0-9A-Fa-f:.]+$/.test(s)) return false;
  const halves = s.split('::');
  if (halves.length > 2) return false;
  const groups = halves.flatMap((h) => (h === '' ? [] : h.split(':')));
  const last = groups[groups.length - 1] ?? '';
  const embedsV4 = last.includes('.');
  if (embedsV4 && !V4.test(last)) return false;
  const hex = embedsV4 ? groups.slice(0, -1) : groups;
  if (!hex.every((g) => /^[0-9A-Fa-f]{1,4}$/.test(g))) return false;
  const count = hex.length + (embedsV4 ? 2 : 0);
  return halves.length === 2 ? count < 8 : count === 8;
}
