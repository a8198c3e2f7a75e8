/**
 * How a sidecar talks to a service's backends: the application protocol
 * (which picks HTTP/2 for gRPC, an HTTP route or a TCP proxy), the connect
 * timeout, and optional outlier detection and active health checks. Absent
 * settings mean the defaults below; a present `outlierDetection: {}` or
 * `healthCheck: {}` turns the feature on with its defaults. Pure.
 */
export type Protocol = 'grpc' | 'http' | 'tcp';
export const PROTOCOLS: readonly Protocol[] = ['grpc', 'http', 'tcp'];

export interface OutlierDetection {
  /** Consecutive 5xx (gRPC: UNAVAILABLE and friends) before a host is ejected. */
  readonly consecutive5xx: number;
  readonly intervalMs: number;
  readonly baseEjectionTimeMs: number;
  readonly maxEjectionPercent: number;
}

export interface HealthCheck {
  readonly intervalMs: number;
  readonly timeoutMs: number;
  readonly unhealthyThreshold: number;
  readonly healthyThreshold: number;
  /** HTTP services: the path probed. */
  readonly path: string;
  /** gRPC services: the grpc.health.v1 service name ('' = the server as a whole). */
  readonly grpcServiceName: string;
}

export interface UpstreamSettings {
  readonly protocol: Protocol;
  readonly connectTimeoutMs: number;
  readonly outlierDetection?: OutlierDetection;
  readonly healthCheck?: HealthCheck;
}

export const DEFAULT_PROTOCOL: Protocol = 'grpc';
export const DEFAULT_CONNECT_TIMEOUT_MS = 1000;

// Envoy's own defaults, except a shorter base ejection so a recovered backend comes back soon.
export const DEFAULT_OUTLIER_DETECTION: OutlierDetection = {
  consecutive5xx: 5,
  intervalMs: 10_000,
  baseEjectionTimeMs: 30_000,
  maxEjectionPercent: 10,
};

export const DEFAULT_HEALTH_CHECK: HealthCheck = {
  intervalMs: 5_000,
  timeoutMs: 1_000,
  unhealthyThreshold: 3,
  healthyThreshold: 2,
  path: '/healthz',
  grpcServiceName: '',
};

/** The settings in force for a service: what its spec says, defaults for the rest. */
export function upstreamOf(spec: UpstreamSpec): UpstreamSettings {
  return {
    protocol: spec.protocol ?? DEFAULT_PROTOCOL,
    connectTimeoutMs: spec.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS,
    ...(spec.outlierDetection ? { outlierDetection: spec.outlierDetection } : {}),
    ...(spec.healthCheck ? { healthCheck: spec.healthCheck } : {}),
  };
}

/**
 * What a sidecar does with endpoints that may take no new requests:
 * - `count`: sent in their priority with their health, where they count in it
 *   (Envoy's own rule: 2 of 100 healthy spills most traffic to the next priority);
 * - `park`: left out of the priorities Canopy computes and sent after the last
 *   one, so a priority keeps its traffic while any endpoint in it is up.
 */
export type UnhealthyMode = 'park' | 'count';
export const UNHEALTHY_MODES: readonly UnhealthyMode[] = ['park', 'count'];
/** istio/istio#48084: an Envoy that sees "2 of 2 healthy" when 98 of 100 are down overloads the 2. */
export const DEFAULT_UNHEALTHY: UnhealthyMode = 'count';

export function unhealthyOf(spec: UpstreamSpec): UnhealthyMode {
  return spec.unhealthy ?? DEFAULT_UNHEALTHY;
}

/** Envoy's retry conditions (router filter, x-envoy-retry-on and x-envoy-retry-grpc-on). */
export const RETRY_ON = [
  '5xx',
  'gateway-error',
  'reset',
  'connect-failure',
  'envoy-ratelimited',
  'retriable-4xx',
  'refused-stream',
  'retriable-status-codes',
  'retriable-headers',
  'http3-post-connect-failure',
  'cancelled',
  'deadline-exceeded',
  'internal',
  'resource-exhausted',
  'unavailable',
] as const;
export type RetryOn = (typeof RETRY_ON)[number];

export interface RetryPolicy {
  /** Retries after the first attempt. */
  readonly attempts: number;
  readonly retryOn: readonly RetryOn[];
  /** Each attempt's timeout; absent = the route's. */
  readonly perTryTimeoutMs?: number;
}

export const DEFAULT_RETRY_ATTEMPTS = 2;
/** istiod's default conditions, safe for gRPC and HTTP: the request never reached the application. */
export const DEFAULT_RETRY_ON: readonly RetryOn[] = [
  'connect-failure',
  'refused-stream',
  'unavailable',
  'cancelled',
  'retriable-status-codes',
];

export interface RouteSettings {
  /** 0 = disabled. */
  readonly timeoutMs: number;
  /** Absent = Envoy's stream_idle_timeout. */
  readonly idleTimeoutMs?: number;
  readonly retries?: RetryPolicy;
}

/** The route settings in force for a service (defaults as istiod: no timeout, no retries). */
export function routeOf(spec: UpstreamSpec): RouteSettings {
  return {
    timeoutMs: spec.timeoutMs ?? 0,
    ...(spec.idleTimeoutMs !== undefined ? { idleTimeoutMs: spec.idleTimeoutMs } : {}),
    ...(spec.retries ? { retries: spec.retries } : {}),
  };
}

/**
 * The fields of a service's spec (ServiceSpec, service.ts) read here: named
 * in this file so it need not import service.ts, which imports its types.
 */
export interface UpstreamSpec {
  readonly protocol?: Protocol;
  readonly connectTimeoutMs?: number;
  readonly outlierDetection?: OutlierDetection;
  readonly healthCheck?: HealthCheck;
  readonly timeoutMs?: number;
  readonly idleTimeoutMs?: number;
  readonly retries?: RetryPolicy;
  readonly unhealthy?: UnhealthyMode;
}
