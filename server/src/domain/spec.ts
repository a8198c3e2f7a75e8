/**
 * Config and admin input → the service model. Validation is data: every
 * problem is collected with the path of the field at fault; nothing throws.
 */
import type { FieldError, ValidationResult } from './errors.js';
import { DEFAULT_SCOPES, isScope, MAX_SCOPES, type Scope } from './locality.js';
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
}

export interface CanopyConfig {
  readonly services: readonly ServiceSpec[];
  readonly server: ServerSettings;
}

export const DEFAULT_OVERPROVISIONING = 140;
const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$/;
const MAX_WEIGHT = 1_000_000;

type Obj = Record<string, unknown>;

/** Collects errors while reading one input. */
class Reader {
  readonly errors: FieldError[] = [];

  fail(path: string, message: string): undefined {
    this.errors.push({ path, message });
    return undefined;
  }

  object(v: unknown, path: string, allowed: readonly string[]): Obj | undefined {
    if (typeof v !== 'object' || v === null || Array.isArray(v)) return this.fail(path, `must be an object, got ${kind(v)}`);
    for (const k of Object.keys(v)) {
      if (!allowed.includes(k)) this.fail(join(path, k), `unknown field (expected one of: ${allowed.join(', ')})`);
    }
    return v as Obj;
  }

  string(v: unknown, path: string): string | undefined {
    return typeof v === 'string' ? v : this.fail(path, `must be a string, got ${kind(v)}`);
  }

  int(v: unknown, path: string, min: number, max: number): number | undefined {
    if (typeof v !== 'number' || !Number.isInteger(v)) return this.fail(path, `must be an integer, got ${kind(v)}`);
    if (v < min || v > max) return this.fail(path, `must be between ${min} and ${max}, got ${v}`);
    return v;
  }

  oneOf<T extends string>(v: unknown, path: string, values: readonly T[]): T | undefined {
    if (typeof v === 'string' && (values as readonly string[]).includes(v)) return v as T;
    return this.fail(path, `must be one of ${values.join(', ')}, got ${kind(v)}`);
  }

  ip(v: unknown, path: string): string | undefined {
    const s = this.string(v, path);
    if (s === undefined) return undefined;
    return isIp(s) ? s : this.fail(path, `must be an IPv4 or IPv6 address, got "${s}"`);
  }
}

export function parseConfig(input: unknown): ValidationResult<CanopyConfig> {
  const r = new Reader();
  const o = r.object(input ?? {}, '', ['services', 'server']);
  const services: ServiceSpec[] = [];
  let server: ServerSettings = {};
  if (o) {
    if (!Array.isArray(o['services'])) r.fail('services', `must be a list of services, got ${kind(o['services'])}`);
    else {
      const seen = new Set<string>();
      o['services'].forEach((s, i) => {
        const spec = readService(r, s, `services[${i}]`);
        if (!spec) return;
        if (seen.has(spec.name)) r.fail(`services[${i}].name`, `duplicate service name "${spec.name}"`);
        seen.add(spec.name);
        services.push(spec);
      });
    }
    if (o['server'] !== undefined) server = readServer(r, o['server']) ?? {};
  }
  return r.errors.length ? { ok: false, errors: r.errors } : { ok: true, value: { services, server } };
}

export function parseServiceSpec(input: unknown, path = ''): ValidationResult<ServiceSpec> {
  const r = new Reader();
  const spec = readService(r, input, path);
  return r.errors.length || !spec ? { ok: false, errors: r.errors } : { ok: true, value: spec };
}

/** Validates one endpoint field change (admin PATCH); returns the updated endpoint. */
export function patchEndpoint(ep: Endpoint, input: unknown): ValidationResult<Endpoint> {
  const r = new Reader();
  const o = r.object(input, '', ['health', 'weight']);
  let next: Endpoint = ep;
  if (o) {
    if (o['health'] !== undefined) {
      const health = r.oneOf<Health>(o['health'], 'health', HEALTH_VALUES);
      if (health) next = { ...next, health };
    }
    if (o['weight'] !== undefined) {
      const weight = r.int(o['weight'], 'weight', 1, MAX_WEIGHT);
      if (weight !== undefined) next = { ...next, weight };
    }
  }
  return r.errors.length ? { ok: false, errors: r.errors } : { ok: true, value: next };
}

function readServer(r: Reader, v: unknown): ServerSettings | undefined {
  const o = r.object(v, 'server', ['host', 'xdsPort', 'adminPort', 'debounceMs']);
  if (!o) return undefined;
  const host = o['host'] === undefined ? undefined : r.string(o['host'], 'server.host');
  const xdsPort = o['xdsPort'] === undefined ? undefined : r.int(o['xdsPort'], 'server.xdsPort', 0, 65535);
  const adminPort = o['adminPort'] === undefined ? undefined : r.int(o['adminPort'], 'server.adminPort', 0, 65535);
  const debounceMs = o['debounceMs'] === undefined ? undefined : r.int(o['debounceMs'], 'server.debounceMs', 0, 60_000);
  return {
    ...(host !== undefined ? { host } : {}),
    ...(xdsPort !== undefined ? { xdsPort } : {}),
    ...(adminPort !== undefined ? { adminPort } : {}),
    ...(debounceMs !== undefined ? { debounceMs } : {}),
  };
}

function readService(r: Reader, v: unknown, path: string): ServiceSpec | undefined {
  const before = r.errors.length;
  const o = r.object(v, path, ['name', 'port', 'vip', 'loadBalancing', 'endpoints']);
  if (!o) return undefined;
  const name = r.string(o['name'], join(path, 'name'));
  if (name !== undefined && !NAME.test(name)) {
    r.fail(join(path, 'name'), `must be 1-253 characters of A-Z a-z 0-9 . _ -, starting with a letter or digit, got "${name}"`);
  }
  const port = o['port'] === undefined ? undefined : r.int(o['port'], join(path, 'port'), 1, 65535);
  const vip = o['vip'] === undefined ? undefined : r.ip(o['vip'], join(path, 'vip'));
  const loadBalancing = readLoadBalancing(r, o['loadBalancing'], join(path, 'loadBalancing'));
  const endpoints: Endpoint[] = [];
  if (o['endpoints'] !== undefined && !Array.isArray(o['endpoints'])) {
    r.fail(join(path, 'endpoints'), `must be a list, got ${kind(o['endpoints'])}`);
  } else {
    const seen = new Set<string>();
    ((o['endpoints'] as unknown[] | undefined) ?? []).forEach((e, i) => {
      const p = `${join(path, 'endpoints')}[${i}]`;
      const ep = readEndpoint(r, e, p);
      if (!ep) return;
      const key = endpointKey(ep);
      if (seen.has(key)) r.fail(p, `duplicate endpoint ${key} (an address appears once per service)`);
      seen.add(key);
      endpoints.push(ep);
    });
  }
  if (r.errors.length > before || name === undefined || !loadBalancing) return undefined;
  return {
    name,
    ...(port !== undefined ? { port } : {}),
    ...(vip !== undefined ? { vip } : {}),
    loadBalancing,
    endpoints,
  };
}

function readLoadBalancing(r: Reader, v: unknown, path: string): LoadBalancing | undefined {
  const defaults: LoadBalancing = {
    mode: 'failover',
    routingPreference: DEFAULT_SCOPES,
    crossNetworkFailover: true,
    overprovisioningFactor: DEFAULT_OVERPROVISIONING,
  };
  if (v === undefined) return defaults;
  const o = r.object(v, path, ['mode', 'routingPreference', 'crossNetworkFailover', 'overprovisioningFactor']);
  if (!o) return undefined;
  const mode = o['mode'] === undefined ? defaults.mode : r.oneOf<LbMode>(o['mode'], join(path, 'mode'), LB_MODES);
  let routingPreference: Scope[] | undefined = [...DEFAULT_SCOPES];
  const rp = o['routingPreference'];
  if (rp !== undefined) {
    const p = join(path, 'routingPreference');
    if (!Array.isArray(rp)) routingPreference = r.fail(p, `must be a list of scopes, got ${kind(rp)}`);
    else if (rp.length < 1 || rp.length > MAX_SCOPES) routingPreference = r.fail(p, `must have 1 to ${MAX_SCOPES} scopes, got ${rp.length}`);
    else {
      const scopes: Scope[] = [];
      rp.forEach((s, i) => {
        if (!isScope(s)) r.fail(`${p}[${i}]`, `must be network, region, zone, subzone, node, cluster or label:<key>, got ${kind(s)}`);
        else if (scopes.includes(s)) r.fail(`${p}[${i}]`, `duplicate scope "${s}"`);
        else scopes.push(s);
      });
      routingPreference = scopes;
    }
  }
  let crossNetworkFailover: boolean | undefined = defaults.crossNetworkFailover;
  if (o['crossNetworkFailover'] !== undefined) {
    crossNetworkFailover =
      typeof o['crossNetworkFailover'] === 'boolean'
        ? o['crossNetworkFailover']
        : r.fail(join(path, 'crossNetworkFailover'), `must be true or false, got ${kind(o['crossNetworkFailover'])}`);
  }
  const overprovisioningFactor =
    o['overprovisioningFactor'] === undefined
      ? defaults.overprovisioningFactor
      : r.int(o['overprovisioningFactor'], join(path, 'overprovisioningFactor'), 100, 100_000);
  if (!mode || !routingPreference || crossNetworkFailover === undefined || overprovisioningFactor === undefined) return undefined;
  return { mode, routingPreference, crossNetworkFailover, overprovisioningFactor };
}

function readEndpoint(r: Reader, v: unknown, path: string): Endpoint | undefined {
  const before = r.errors.length;
  const o = r.object(v, path, ['address', 'port', 'locality', 'network', 'node', 'cluster', 'labels', 'health', 'weight']);
  if (!o) return undefined;
  const address = r.ip(o['address'], join(path, 'address'));
  const port = r.int(o['port'], join(path, 'port'), 1, 65535);
  const locality = { region: '', zone: '', subzone: '' };
  if (o['locality'] !== undefined) {
    const lp = join(path, 'locality');
    const l = r.object(o['locality'], lp, ['region', 'zone', 'subzone']);
    for (const k of ['region', 'zone', 'subzone'] as const) {
      if (l?.[k] !== undefined) locality[k] = r.string(l[k], join(lp, k)) ?? '';
    }
  }
  const opt = (k: 'network' | 'node' | 'cluster'): string => (o[k] === undefined ? '' : (r.string(o[k], join(path, k)) ?? ''));
  const labels: Record<string, string> = {};
  if (o['labels'] !== undefined) {
    const lp = join(path, 'labels');
    if (typeof o['labels'] !== 'object' || o['labels'] === null || Array.isArray(o['labels'])) {
      r.fail(lp, `must be an object of strings, got ${kind(o['labels'])}`);
    } else {
      for (const [k, val] of Object.entries(o['labels'] as Obj)) {
        if (typeof val === 'string') labels[k] = val;
        else r.fail(join(lp, k), `must be a string, got ${kind(val)}`);
      }
    }
  }
  const health = o['health'] === undefined ? 'healthy' : r.oneOf<Health>(o['health'], join(path, 'health'), HEALTH_VALUES);
  const weight = o['weight'] === undefined ? 1 : r.int(o['weight'], join(path, 'weight'), 1, MAX_WEIGHT);
  const network = opt('network');
  const node = opt('node');
  const cluster = opt('cluster');
  if (r.errors.length > before || address === undefined || port === undefined || !health || weight === undefined) return undefined;
  return { address, port, locality, network, node, cluster, labels, health, weight };
}

/** The canonical JSON form of a spec; parseServiceSpec accepts it back. */
export function serviceSpecToJson(spec: ServiceSpec): Obj {
  return {
    name: spec.name,
    ...(spec.port !== undefined ? { port: spec.port } : {}),
    ...(spec.vip !== undefined ? { vip: spec.vip } : {}),
    loadBalancing: {
      mode: spec.loadBalancing.mode,
      routingPreference: [...spec.loadBalancing.routingPreference],
      crossNetworkFailover: spec.loadBalancing.crossNetworkFailover,
      overprovisioningFactor: spec.loadBalancing.overprovisioningFactor,
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
    labels: { ...e.labels },
    health: e.health,
    weight: e.weight,
  };
}

function join(path: string, key: string): string {
  return path ? `${path}.${key}` : key;
}

function kind(v: unknown): string {
  if (v === undefined) return 'nothing';
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'a list';
  if (typeof v === 'string') return `"${v.length > 40 ? `${v.slice(0, 40)}…` : v}"`;
  if (typeof v === 'object') return 'an object';
  return `${typeof v} ${String(v)}`;
}

/** IPv4 dotted quad or IPv6 literal; pure, so no node:net. */
export function isIp(s: string): boolean {
  const v4 = /^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$/;
  if (v4.test(s)) return true;
  if (!s.includes(':') || !/^[0-9A-Fa-f:.]+$/.test(s)) return false;
  const parts = s.split('::');
  if (parts.length > 2) return false;
  const groups = (p: string): string[] => (p === '' ? [] : p.split(':'));
  const all = parts.flatMap(groups);
  const last = all[all.length - 1] ?? '';
  const hasV4 = last.includes('.');
  if (hasV4 && !v4.test(last)) return false;
  const hexGroups = hasV4 ? all.slice(0, -1) : all;
  if (!hexGroups.every((g) => /^[0-9A-Fa-f]{1,4}$/.test(g))) return false;
  const count = hexGroups.length + (hasV4 ? 2 : 0);
  return parts.length === 2 ? count < 8 : count === 8;
}
