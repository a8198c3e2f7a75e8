/**
 * Config and admin input → the service model. Validation is data: every
 * problem is collected with the path of the field at fault; nothing throws.
 * Unknown keys are errors so that a typo (`endpionts`) is reported rather
 * than silently meaning "no endpoints".
 */
import ipaddr from 'ipaddr.js';
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
import { policyToJson } from './policy.js';
import { readPolicy } from './policy-spec.js';
import { DEFAULT_LAZY, type LazySettings } from './demand.js';
import { DEFAULT_HEALTH_CHECK, DEFAULT_OUTLIER_DETECTION, PROTOCOLS, type Protocol } from './upstream.js';

export interface ServerSettings {
  readonly host?: string;
  readonly xdsPort?: number;
  readonly adminPort?: number;
  readonly debounceMs?: number;
  /** Lazy xDS for sidecars (default off: full LDS/CDS). */
  readonly lazyXds?: LazySettings;
  /** Streams with a push in flight at once (0: no limit). */
  readonly pushWindow?: number;
}

export interface CanopyConfig {
  readonly services: readonly ServiceSpec[];
  readonly server: ServerSettings;
  /** From importing Istio, Kuma or Kubernetes documents: what was not imported or differs (policy/import.ts). */
  readonly notes?: readonly FieldError[];
}

export const DEFAULT_OVERPROVISIONING = 140;
export const MAX_ENDPOINT_WEIGHT = 1_000_000;
/** uint32: the most a locality's load_balancing_weight, or a priority's total, can carry. */
export const MAX_TOTAL_WEIGHT = 0xffff_ffff;
const MAX_OVERPROVISIONING = 100_000;
const MAX_DEBOUNCE_MS = 60_000;
const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$/;

const SIDECAR_KEYS = ['protocol', 'connectTimeoutMs', 'outlierDetection', 'healthCheck', 'outboundPort'];
const SERVICE_KEYS = ['name', 'port', 'vip', 'loadBalancing', 'endpoints', ...SIDECAR_KEYS];
const LB_KEYS = ['mode', 'routingPreference', 'crossNetworkFailover', 'overprovisioningFactor', 'policy'];
const ENDPOINT_KEYS = ['address', 'port', 'locality', 'network', 'node', 'cluster', 'labels', 'health', 'weight'];
const LOCALITY_KEYS = ['region', 'zone', 'subzone'] as const;
const SERVER_KEYS = ['host', 'xdsPort', 'adminPort', 'debounceMs', 'lazyXds', 'pushWindow'];
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

/** `address:port`, IPv6 as `[address]:port`, in any spelling → the endpointKey it names; undefined if it names none. */
export function parseEndpointKey(text: string): string | undefined {
  const m = /^(?:\[([^\]]+)\]|([^:[\]]+)):(\d{1,5})$/.exec(text);
  const address = m?.[1] ?? m?.[2];
  const port = Number(m?.[3]);
  if (address === undefined || !isIp(address) || !(port >= 1 && port <= 65535)) return undefined;
  return endpointKey({ address: canonicalIp(address), port });
}

export interface EndpointChanges {
  readonly upserts: readonly Endpoint[];
  readonly removals: readonly string[];
}

const CHANGES_KEYS = ['upsert', 'remove', 'patch'];
const ENDPOINT_PATCH_KEYS = ['endpoint', ...PATCH_KEYS];

/**
 * A bulk change of one service's endpoints: `upsert` whole endpoints (config
 * shape), `remove` keys, `patch` the health/weight of existing ones. Every
 * problem is reported with its path; `current` looks up held endpoints by key.
 */
export function parseEndpointChanges(
  input: unknown,
  current: (key: string) => Endpoint | undefined,
): ValidationResult<EndpointChanges> {
  const r = new Reader();
  const o = r.object(input, '', CHANGES_KEYS);
  if (!o) return r.failed();
  const upserts = new Map<string, Endpoint>();
  const removals: string[] = [];
  const touched = (key: string, p: string) => {
    if (upserts.has(key) || removals.includes(key)) r.fail(p, `endpoint ${key} appears more than once in this change`);
  };
  r.optional(o, 'upsert', '', (x, p) =>
    readEndpoints(r, x, p)?.forEach((ep, i) => {
      touched(endpointKey(ep), `${p}[${i}]`);
      upserts.set(endpointKey(ep), ep);
    }),
  );
  r.optional(o, 'remove', '', (x, p) =>
    Array.isArray(x)
      ? x.forEach((k, i) => {
          const key = typeof k === 'string' ? parseEndpointKey(k) : undefined;
          if (key === undefined) return r.fail(`${p}[${i}]`, `must be "address:port" (IPv6 as "[address]:port"), got ${describe(k)}`);
          touched(key, `${p}[${i}]`);
          removals.push(key);
        })
      : r.fail(p, `must be a list of "address:port" keys, got ${describe(x)}`),
  );
  r.optional(o, 'patch', '', (x, p) =>
    Array.isArray(x)
      ? x.forEach((raw, i) => {
          const at = `${p}[${i}]`;
          const e = r.object(raw, at, ENDPOINT_PATCH_KEYS);
          if (!e) return;
          const key = typeof e['endpoint'] === 'string' ? parseEndpointKey(e['endpoint']) : undefined;
          const held = key !== undefined ? current(key) : undefined;
          if (key === undefined || !held) {
            return r.fail(join(at, 'endpoint'), `must name an endpoint of the service, got ${describe(e['endpoint'])}`);
          }
          const { endpoint: _named, ...change } = e;
          const patched = patchEndpoint(held, change);
          if (!patched.ok) for (const f of patched.errors) r.fail(join(at, f.path), f.message);
          else {
            touched(key, at);
            upserts.set(key, patched.value);
          }
        })
      : r.fail(p, `must be a list of {endpoint, health?, weight?}, got ${describe(x)}`),
  );
  return r.result({ upserts: [...upserts.values()], removals });
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
  const lazyXds = r.optional(o, 'lazyXds', 'server', (x, p) => readLazy(r, x, p));
  const pushWindow = r.optional(o, 'pushWindow', 'server', (x, p) => r.int(x, p, 0, 1_000_000));
  return {
    ...(lazyXds !== undefined ? { lazyXds } : {}),
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
  const totalWeight = endpoints.reduce((n, e) => n + e.weight, 0);
  if (totalWeight > MAX_TOTAL_WEIGHT) {
    r.fail(
      join(path, 'endpoints'),
      `weights sum to ${totalWeight}; xDS carries a locality's weight and a priority's total as uint32, ` +
        `so a service's endpoint weights may sum to at most ${MAX_TOTAL_WEIGHT}`,
    );
  }
  const sidecar = readSidecarSettings(r, o, path);
  if (r.errors.length > before || name === undefined) return undefined;
  return {
    name,
    ...(port !== undefined ? { port } : {}),
    ...(vip !== undefined ? { vip } : {}),
    loadBalancing,
    endpoints,
    ...sidecar,
  };
}

/** Returns the defaults for anything absent or invalid; invalid input has been reported. */
function readLoadBalancing(r: Reader, v: unknown, path: string): LoadBalancing {
  const o = v === undefined ? {} : (r.object(v, path, LB_KEYS) ?? {});
  const lb: LoadBalancing = {
    mode: r.optional(o, 'mode', path, (x, p) => r.oneOf<LbMode>(x, p, LB_MODES)) ?? 'failover',
    routingPreference: r.optional(o, 'routingPreference', path, (x, p) => readScopes(r, x, p)) ?? DEFAULT_SCOPES,
    crossNetworkFailover: r.optional(o, 'crossNetworkFailover', path, r.bool) ?? true,
    overprovisioningFactor:
      r.optional(o, 'overprovisioningFactor', path, (x, p) => r.int(x, p, 100, MAX_OVERPROVISIONING)) ??
      DEFAULT_OVERPROVISIONING,
  };
  // The locality policy (Istio, Kuma, Kubernetes features): domain/policy-spec.ts.
  const policy = r.optional(o, 'policy', path, (x, p) => readPolicy(r, x, p, lb));
  return policy ? { ...lb, policy } : lb;
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
      ...(lb.policy ? { policy: policyToJson(lb.policy) } : {}),
    },
    endpoints: spec.endpoints.map(endpointToJson),
    ...sidecarSettingsToJson(spec),
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

// ------------------------------------------------- sidecar (Envoy) settings

const OUTLIER_KEYS = Object.keys(DEFAULT_OUTLIER_DETECTION);
const HEALTH_CHECK_KEYS = Object.keys(DEFAULT_HEALTH_CHECK);
const MAX_MS = 3_600_000;

type SidecarSettings = Pick<ServiceSpec, 'protocol' | 'connectTimeoutMs' | 'outlierDetection' | 'healthCheck' | 'outboundPort'>;

/** Only what the input sets; upstreamOf() supplies the defaults. An empty object turns a feature on with its defaults. */
function readSidecarSettings(r: Reader, o: Obj, path: string): SidecarSettings {
  const ms = (min: number) => (x: unknown, p: string) => r.int(x, p, min, MAX_MS);
  const protocol = r.optional(o, 'protocol', path, (x, p) => r.oneOf<Protocol>(x, p, PROTOCOLS));
  const connectTimeoutMs = r.optional(o, 'connectTimeoutMs', path, ms(1));
  const outboundPort = r.optional(o, 'outboundPort', path, (x, p) => r.int(x, p, 1, 65535));
  const outlierDetection = r.optional(o, 'outlierDetection', path, (x, p) => {
    const od = r.object(x, p, OUTLIER_KEYS);
    if (!od) return undefined;
    const d = DEFAULT_OUTLIER_DETECTION;
    return {
      consecutive5xx: r.optional(od, 'consecutive5xx', p, (v, q) => r.int(v, q, 1, 1000)) ?? d.consecutive5xx,
      intervalMs: r.optional(od, 'intervalMs', p, ms(1)) ?? d.intervalMs,
      baseEjectionTimeMs: r.optional(od, 'baseEjectionTimeMs', p, ms(1)) ?? d.baseEjectionTimeMs,
      maxEjectionPercent: r.optional(od, 'maxEjectionPercent', p, (v, q) => r.int(v, q, 0, 100)) ?? d.maxEjectionPercent,
    };
  });
  const healthCheck = r.optional(o, 'healthCheck', path, (x, p) => {
    const hc = r.object(x, p, HEALTH_CHECK_KEYS);
    if (!hc) return undefined;
    const d = DEFAULT_HEALTH_CHECK;
    const count = (v: unknown, q: string) => r.int(v, q, 1, 100);
    const out = {
      intervalMs: r.optional(hc, 'intervalMs', p, ms(1)) ?? d.intervalMs,
      timeoutMs: r.optional(hc, 'timeoutMs', p, ms(1)) ?? d.timeoutMs,
      unhealthyThreshold: r.optional(hc, 'unhealthyThreshold', p, count) ?? d.unhealthyThreshold,
      healthyThreshold: r.optional(hc, 'healthyThreshold', p, count) ?? d.healthyThreshold,
      path: r.optional(hc, 'path', p, r.string) ?? d.path,
      grpcServiceName: r.optional(hc, 'grpcServiceName', p, r.string) ?? d.grpcServiceName,
    };
    if (!out.path.startsWith('/')) r.fail(join(p, 'path'), `must start with "/", got ${describe(out.path)}`);
    return out;
  });
  return {
    ...(protocol !== undefined ? { protocol } : {}),
    ...(connectTimeoutMs !== undefined ? { connectTimeoutMs } : {}),
    ...(outlierDetection !== undefined ? { outlierDetection } : {}),
    ...(healthCheck !== undefined ? { healthCheck } : {}),
    ...(outboundPort !== undefined ? { outboundPort } : {}),
  };
}

function readLazy(r: Reader, v: unknown, path: string): LazySettings | undefined {
  const o = r.object(v, path, ['enabled', 'unusedTimeoutMs']);
  if (!o) return undefined;
  return {
    enabled: r.optional(o, 'enabled', path, r.bool) ?? DEFAULT_LAZY.enabled,
    unusedTimeoutMs: r.optional(o, 'unusedTimeoutMs', path, (x, p) => r.int(x, p, 0, 86_400_000)) ?? DEFAULT_LAZY.unusedTimeoutMs,
  };
}

function sidecarSettingsToJson(spec: ServiceSpec): Obj {
  const out: Obj = {};
  for (const k of SIDECAR_KEYS) {
    const v = (spec as unknown as Obj)[k];
    if (v !== undefined) out[k] = typeof v === 'object' ? { ...v } : v;
  }
  return out;
}

/** Collects the errors found while reading one input. */
export class Reader {
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

  /** An address a client can connect to, in its canonical spelling. */
  readonly ip = (v: unknown, path: string): string | undefined => {
    if (typeof v !== 'string' || !isIp(v))
      return this.fail(path, `must be an IPv4 or IPv6 address literal, got ${describe(v)}`);
    if (isUnspecified(v)) return this.fail(path, `must be a unicast address, got the unspecified address ${describe(v)}`);
    return canonicalIp(v);
  };

  int(v: unknown, path: string, min: number, max: number): number | undefined {
    if (typeof v === 'number' && Number.isInteger(v) && v >= min && v <= max) return v;
    return this.fail(path, `must be an integer from ${min} to ${max}, got ${describe(v)}`);
  }

  oneOf<T extends string>(v: unknown, path: string, values: readonly T[]): T | undefined {
    if (typeof v === 'string' && (values as readonly string[]).includes(v)) return v as T;
    return this.fail(path, `must be one of ${values.join(', ')}, got ${describe(v)}`);
  }
}

export function isObject(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export function join(path: string, key: string): string {
  return path ? `${path}.${key}` : key;
}

/** The received value, briefly, for error messages. */
export function describe(v: unknown): string {
  if (v === undefined) return 'nothing';
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'a list';
  if (typeof v === 'string') return JSON.stringify(v.length > 40 ? `${v.slice(0, 40)}…` : v);
  if (typeof v === 'object') return 'an object';
  return `${typeof v} ${String(v)}`;
}

/** An IPv4 dotted quad or an IPv6 literal (no zone id). Syntax only: see canonicalIp for what an endpoint may be. */
export function isIp(s: string): boolean {
  // Only the four-part decimal form: ipaddr.js's IPv4.isValid also takes "1", "0x7f.1" and octal.
  if (ipaddr.IPv4.isValidFourPartDecimal(s)) return true;
  return s.includes(':') && !s.includes('%') && ipaddr.IPv6.isValid(s);
}

/**
 * The one spelling of an address, so `FD00::1`, `fd00:0::1` and `fd00::1` are
 * one endpoint: IPv6 per RFC 5952 (lower case, longest zero run compressed),
 * IPv4-mapped as `::ffff:a.b.c.d`. Expects isIp(s).
 */
export function canonicalIp(s: string): string {
  const addr = ipaddr.parse(s);
  if (addr.kind() === 'ipv4') return addr.toString();
  const v6 = addr as ipaddr.IPv6;
  return v6.isIPv4MappedAddress() ? `::ffff:${v6.toIPv4Address().toString()}` : v6.toRFC5952String();
}

/** 0.0.0.0 and :: mean "any address" to a listener and nothing to a client. */
export function isUnspecified(s: string): boolean {
  return ipaddr.parse(s).range() === 'unspecified';
}
