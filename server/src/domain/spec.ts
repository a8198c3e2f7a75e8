/**
 * Config and admin input → the service model. Validation is data: every
 * problem is collected with the path of the field at fault; nothing throws.
 * Unknown keys are errors so that a typo (`endpionts`) is reported rather
 * than silently meaning "no endpoints".
 */
import { checkDns, readDns, readEndpointAddress, canonicalHostname, isHostname } from './dns-spec.js';
import { readValidEndpointList } from './endpoint-list.js';
import type { FieldError, ValidationResult } from './errors.js';
import { canonicalIp, isIp } from './ip.js';
import {
  DEFAULT_SCOPES,
  EMPTY_LOCALITY,
  isScope,
  MAX_SCOPES,
  NO_LABELS,
  type Locality,
  type Scope,
} from './locality.js';
import { describe, isObject, join, Reader } from './reader.js';
import {
  endpointKey,
  HEALTH_VALUES,
  LB_MODES,
  MAX_ENDPOINT_WEIGHT,
  MAX_REACH,
  MAX_TOTAL_WEIGHT,
  type Endpoint,
  type Health,
  type LbMode,
  type LoadBalancing,
  type Reach,
  type ServiceSpec,
} from './service.js';
import { readPolicy } from './policy-spec.js';
import type { LazySettings } from './demand.js';
import { isLoadAware, readLoadAware } from './load/load-aware-spec.js';
import { outboundConflicts } from './outbound.js';
import { readLazy, readSidecarSettings, SIDECAR_KEYS } from './sidecar-spec.js';
import { readVips, vipFields } from './vips.js';

// Kept importable from here: the readers and IP helpers moved to their own modules.
export { canonicalIp, isIp, isUnspecified } from './ip.js';
export { describe, isObject, join, Reader } from './reader.js';
export { MAX_ENDPOINT_WEIGHT, MAX_TOTAL_WEIGHT } from './service.js';
export { endpointJson, endpointToJson, serviceSpecToJson } from './spec-json.js';

export interface ServerSettings {
  readonly host?: string;
  readonly xdsPort?: number;
  readonly adminPort?: number;
  readonly debounceMs?: number;
  /** Lazy xDS for sidecars (default off: full LDS/CDS). */
  readonly lazyXds?: LazySettings;
  /** Streams with a push in flight at once (0: no limit). */
  readonly pushWindow?: number;
  /** LEDS for Envoy on delta ADS (default on). */
  readonly leds?: boolean;
  /** How often clients of load-aware services report their load (LRS), in ms (default 10,000). */
  readonly loadReportingIntervalMs?: number;
}

export interface CanopyConfig {
  readonly services: readonly ServiceSpec[];
  readonly server: ServerSettings;
  /** From importing Istio, Kuma or Kubernetes documents: what was not imported or differs (policy/import.ts). */
  readonly notes?: readonly FieldError[];
}

export const DEFAULT_OVERPROVISIONING = 140;
const MAX_OVERPROVISIONING = 100_000;
const MAX_DEBOUNCE_MS = 60_000;
const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$/;

const SERVICE_KEYS = ['name', 'port', 'vip', 'vips', 'loadBalancing', 'endpoints', 'dns', ...SIDECAR_KEYS];
const LB_KEYS = [
  'mode',
  'routingPreference',
  'crossNetworkFailover',
  'overprovisioningFactor',
  'policy',
  'reach',
  'loadAware',
];
const REACH_KEYS = ['minEndpoints'];
const ENDPOINT_KEYS = ['address', 'port', 'locality', 'network', 'node', 'cluster', 'labels', 'health', 'weight'];
const LOCALITY_KEYS = ['region', 'zone', 'subzone'] as const;
const SERVER_KEYS = [
  'host',
  'xdsPort',
  'adminPort',
  'debounceMs',
  'lazyXds',
  'pushWindow',
  'leds',
  'loadReportingIntervalMs',
];
export const PATCH_KEYS = ['health', 'weight'];

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
  if (address === undefined || !(port >= 1 && port <= 65535)) return undefined;
  if (isHostname(address)) return endpointKey({ address: canonicalHostname(address), port });
  return isIp(address) ? endpointKey({ address: canonicalIp(address), port }) : undefined;
}

function readServices(r: Reader, v: unknown): ServiceSpec[] {
  if (!Array.isArray(v)) return r.fail('services', `must be a list of services, got ${describe(v)}`) ?? [];
  const services: ServiceSpec[] = [];
  const paths: string[] = [];
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
    if (spec) {
      services.push(spec);
      paths.push(path);
    }
  });
  // Services an Envoy sidecar could not tell apart on one listener (domain/outbound.ts).
  for (const c of outboundConflicts(services)) r.fail(join(paths[c.index] ?? 'services', c.field), c.message);
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
  const leds = r.optional(o, 'leds', 'server', r.bool);
  const loadReportingIntervalMs = r.optional(o, 'loadReportingIntervalMs', 'server', (x, p) =>
    r.int(x, p, 100, 3_600_000),
  );
  return {
    ...(leds !== undefined ? { leds } : {}),
    ...(loadReportingIntervalMs !== undefined ? { loadReportingIntervalMs } : {}),
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
  const vips = readVips(r, o, path);
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
  // How a sidecar resolves hostname endpoints (domain/dns-spec.ts).
  const dns = r.optional(o, 'dns', path, (x, p) => readDns(r, x, p));
  checkDns(r, dns, endpoints, path);
  const sidecar = readSidecarSettings(r, o, path);
  if (r.errors.length > before || name === undefined) return undefined;
  return {
    name,
    ...(port !== undefined ? { port } : {}),
    ...vipFields(vips ?? []),
    loadBalancing,
    endpoints,
    ...(dns ? { dns } : {}),
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
  const reach = r.optional(o, 'reach', path, (x, p) => readReach(r, x, p));
  const loadAware = r.optional(o, 'loadAware', path, (x, p) => readLoadAware(r, x, p));
  if (isLoadAware(loadAware)) {
    if (lb.mode !== 'failover')
      r.fail(
        join(path, 'loadAware.balancing'),
        `needs mode: failover (the spill follows the failover tiers), got mode: ${lb.mode}`,
      );
    if (policy) r.fail(join(path, 'loadAware'), 'cannot be combined with a locality policy yet: use one or the other');
    if (reach) r.fail(join(path, 'loadAware'), 'cannot be combined with reach: the spill decides how far traffic goes');
    if (lb.routingPreference[0] === 'network')
      r.fail(join(path, 'loadAware'), 'cannot be used with a network-first routingPreference yet');
  }
  return { ...lb, ...(policy ? { policy } : {}), ...(reach ? { reach } : {}), ...(loadAware ? { loadAware } : {}) };
}

function readReach(r: Reader, v: unknown, path: string): Reach | undefined {
  const o = r.object(v, path, REACH_KEYS);
  if (!o) return undefined;
  const minEndpoints = r.int(o['minEndpoints'], join(path, 'minEndpoints'), 1, MAX_REACH);
  return minEndpoints === undefined ? undefined : { minEndpoints };
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

export function readEndpoints(r: Reader, v: unknown, path: string): Endpoint[] | undefined {
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
    address: readEndpointAddress(r, o['address'], join(path, 'address')) ?? '',
    port: r.int(o['port'], join(path, 'port'), 1, 65535) ?? 0,
    locality: r.optional(o, 'locality', path, (x, p) => readLocality(r, x, p)) ?? EMPTY_LOCALITY,
    network: text('network'),
    node: text('node'),
    cluster: text('cluster'),
    labels: r.optional(o, 'labels', path, (x, p) => readLabels(r, x, p)) ?? NO_LABELS,
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
