/**
 * The sidecar (Envoy) settings of a service spec and the server's lazy xDS
 * settings: read with their field paths, and written back as canonical JSON.
 */
import { DEFAULT_LAZY, type LazySettings } from './demand.js';
import { describe, join, type Obj, type Reader } from './reader.js';
import type { ServiceSpec } from './service.js';
import {
  DEFAULT_HEALTH_CHECK,
  DEFAULT_OUTLIER_DETECTION,
  DEFAULT_RETRY_ATTEMPTS,
  DEFAULT_RETRY_ON,
  PROTOCOLS,
  RETRY_ON,
  UNHEALTHY_MODES,
  type Protocol,
  type RetryOn,
  type RetryPolicy,
  type UnhealthyMode,
} from './upstream.js';

export const SIDECAR_KEYS = [
  'protocol',
  'connectTimeoutMs',
  'outlierDetection',
  'healthCheck',
  'outboundPort',
  'timeoutMs',
  'idleTimeoutMs',
  'retries',
  'unhealthy',
];
const RETRY_KEYS = ['attempts', 'retryOn', 'perTryTimeoutMs'];

const OUTLIER_KEYS = Object.keys(DEFAULT_OUTLIER_DETECTION);
const HEALTH_CHECK_KEYS = Object.keys(DEFAULT_HEALTH_CHECK);
const MAX_MS = 3_600_000;

type SidecarSettings = Pick<
  ServiceSpec,
  | 'protocol'
  | 'connectTimeoutMs'
  | 'outlierDetection'
  | 'healthCheck'
  | 'outboundPort'
  | 'timeoutMs'
  | 'idleTimeoutMs'
  | 'retries'
  | 'unhealthy'
>;

/** Only what the input sets; upstreamOf() supplies the defaults. An empty object turns a feature on with its defaults. */
export function readSidecarSettings(r: Reader, o: Obj, path: string): SidecarSettings {
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
      maxEjectionPercent:
        r.optional(od, 'maxEjectionPercent', p, (v, q) => r.int(v, q, 0, 100)) ?? d.maxEjectionPercent,
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
  // Route timeouts: 0 turns one off (the default for timeoutMs, as istiod does).
  const timeoutMs = r.optional(o, 'timeoutMs', path, ms(0));
  const idleTimeoutMs = r.optional(o, 'idleTimeoutMs', path, ms(0));
  const retries = r.optional(o, 'retries', path, (x, p) => readRetries(r, x, p));
  const unhealthy = r.optional(o, 'unhealthy', path, (x, p) => r.oneOf<UnhealthyMode>(x, p, UNHEALTHY_MODES));
  return {
    ...(timeoutMs !== undefined ? { timeoutMs } : {}),
    ...(idleTimeoutMs !== undefined ? { idleTimeoutMs } : {}),
    ...(retries !== undefined ? { retries } : {}),
    ...(unhealthy !== undefined ? { unhealthy } : {}),
    ...(protocol !== undefined ? { protocol } : {}),
    ...(connectTimeoutMs !== undefined ? { connectTimeoutMs } : {}),
    ...(outlierDetection !== undefined ? { outlierDetection } : {}),
    ...(healthCheck !== undefined ? { healthCheck } : {}),
    ...(outboundPort !== undefined ? { outboundPort } : {}),
  };
}

function readRetries(r: Reader, v: unknown, path: string): RetryPolicy | undefined {
  const o = r.object(v, path, RETRY_KEYS);
  if (!o) return undefined;
  const attempts = r.optional(o, 'attempts', path, (x, p) => r.int(x, p, 1, 10)) ?? DEFAULT_RETRY_ATTEMPTS;
  const perTryTimeoutMs = r.optional(o, 'perTryTimeoutMs', path, (x, p) => r.int(x, p, 1, MAX_MS));
  const retryOn =
    r.optional(o, 'retryOn', path, (x, p) => {
      if (!Array.isArray(x) || x.length === 0)
        return r.fail(p, `must be a non-empty list of retry conditions, got ${describe(x)}`);
      const out: RetryOn[] = [];
      x.forEach((c, i) => {
        const on = r.oneOf<RetryOn>(c, `${p}[${i}]`, RETRY_ON);
        if (on !== undefined && !out.includes(on)) out.push(on);
      });
      return out;
    }) ?? DEFAULT_RETRY_ON;
  return { attempts, retryOn, ...(perTryTimeoutMs !== undefined ? { perTryTimeoutMs } : {}) };
}

export function readLazy(r: Reader, v: unknown, path: string): LazySettings | undefined {
  const o = r.object(v, path, ['enabled', 'unusedTimeoutMs']);
  if (!o) return undefined;
  return {
    enabled: r.optional(o, 'enabled', path, r.bool) ?? DEFAULT_LAZY.enabled,
    unusedTimeoutMs:
      r.optional(o, 'unusedTimeoutMs', path, (x, p) => r.int(x, p, 0, 86_400_000)) ?? DEFAULT_LAZY.unusedTimeoutMs,
  };
}

export function sidecarSettingsToJson(spec: ServiceSpec): Obj {
  const out: Obj = {};
  for (const k of SIDECAR_KEYS) {
    const v = (spec as unknown as Obj)[k];
    if (v === undefined) continue;
    if (k === 'retries') {
      const rp = v as RetryPolicy;
      out[k] = { ...rp, retryOn: [...rp.retryOn] };
    } else out[k] = typeof v === 'object' ? { ...v } : v;
  }
  return out;
}
