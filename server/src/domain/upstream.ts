/**
 * How a sidecar talks to a service's backends: the application protocol
 * (which picks HTTP/2 for gRPC, an HTTP route or a TCP proxy), the connect
 * timeout, and optional outlier detection and active health checks. Absent
 * settings mean the defaults below; a present `outlierDetection: {}` or
 * `healthCheck: {}` turns the feature on with its defaults. Pure.
 */
import type { ServiceSpec } from './service.js';

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
export function upstreamOf(spec: ServiceSpec): UpstreamSettings {
  return {
    protocol: spec.protocol ?? DEFAULT_PROTOCOL,
    connectTimeoutMs: spec.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS,
    ...(spec.outlierDetection ? { outlierDetection: spec.outlierDetection } : {}),
    ...(spec.healthCheck ? { healthCheck: spec.healthCheck } : {}),
  };
}
