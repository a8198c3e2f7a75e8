/**
 * The service model: what a config entry or an admin PUT describes.
 */
import type { DnsSettings } from './dns-spec.js';
import type { LoadAware } from './load/load-aware-spec.js';
import type { Placement, Scope } from './locality.js';
import type { LocalityPolicy } from './policy.js';
import type { HealthCheck, OutlierDetection, Protocol, RetryPolicy, UnhealthyMode } from './upstream.js';

/** The most one endpoint's weight may be. */
export const MAX_ENDPOINT_WEIGHT = 1_000_000;
/** uint32: the most a locality's load_balancing_weight, or a priority's total, can carry. */
export const MAX_TOTAL_WEIGHT = 0xffff_ffff;

/**
 * `terminating`: shutting down but still serving (a Kubernetes EndpointSlice
 * endpoint with `serving` and `terminating` true). As in kube-proxy, such
 * endpoints get traffic only while the service has no healthy endpoint at
 * all, so a rollout that terminates every pod is not an outage.
 */
export type Health = 'healthy' | 'unhealthy' | 'draining' | 'terminating';
export const HEALTH_VALUES: readonly Health[] = ['healthy', 'unhealthy', 'draining', 'terminating'];

export interface Endpoint extends Placement {
  /** An IP literal, or a DNS hostname that the client resolves (domain/dns-spec.ts). */
  readonly address: string;
  readonly port: number;
  readonly health: Health;
  /** Relative weight within its locality, >= 1. */
  readonly weight: number;
}

export type LbMode = 'random' | 'failover' | 'strict';
export const LB_MODES: readonly LbMode[] = ['random', 'failover', 'strict'];

export interface LoadBalancing {
  readonly mode: LbMode;
  /** Ordered tree levels, most significant first (1..8). */
  readonly routingPreference: readonly Scope[];
  /**
   * Only read when routingPreference[0] is `network`: an endpoint on another
   * network still ranks by the remaining levels, below every same-network
   * endpoint (Istio and ztunnel). When false, other networks form one last tier.
   */
  readonly crossNetworkFailover: boolean;
  /** The CLA policy's overprovisioning_factor, in percent (Envoy's default 140). */
  readonly overprovisioningFactor: number;
  /** Istio, Kuma and Kubernetes features over the tree (domain/policy.ts); absent = the tree alone. */
  readonly policy?: LocalityPolicy;
  /** A cap on how far a client's CLA reaches (failover mode); absent = every tier. */
  readonly reach?: Reach;
  /** Load-aware locality from client load reports (failover mode); absent = off. */
  readonly loadAware?: LoadAware;
}

/**
 * Priorities are added, best first and each one whole, until they hold at
 * least `minEndpoints` endpoints of the tree the plan is computed on (the
 * routable ones for EDS); later priorities are left out. Priority 0 is always
 * sent, however small.
 */
export interface Reach {
  readonly minEndpoints: number;
}

/** The largest `reach.minEndpoints` accepted. */
export const MAX_REACH = 1_000_000;

export interface ServiceSpec {
  readonly name: string;
  readonly port?: number;
  /** The primary VIP; `vips` too when the service has one per family (domain/vips.ts). */
  readonly vip?: string;
  /** Both VIPs of a dual-stack service, `vip` first (one per family); absent with one VIP. */
  readonly vips?: readonly string[];
  readonly loadBalancing: LoadBalancing;
  readonly endpoints: readonly Endpoint[];
  // Sidecar (Envoy) settings; absent means the defaults of upstream.ts.
  readonly protocol?: Protocol;
  readonly connectTimeoutMs?: number;
  readonly outlierDetection?: OutlierDetection;
  readonly healthCheck?: HealthCheck;
  /** The port a sidecar's outbound listener for this service binds on a local outbound address. */
  readonly outboundPort?: number;
  /** A sidecar's route timeout for a whole request or stream; absent = 0, disabled (as istiod). */
  readonly timeoutMs?: number;
  /** A sidecar's route idle timeout; absent = Envoy's stream_idle_timeout (5 min), 0 = disabled. */
  readonly idleTimeoutMs?: number;
  /** A sidecar's retries; absent = none. */
  readonly retries?: RetryPolicy;
  /** How a sidecar is sent unhealthy and draining endpoints; absent = DEFAULT_UNHEALTHY (upstream.ts). */
  readonly unhealthy?: UnhealthyMode;
  /** How a sidecar resolves hostname endpoints (domain/dns-spec.ts); absent = DEFAULT_DNS. */
  readonly dns?: DnsSettings;
}

/** Identity of an endpoint inside one service: its socket address. */
export function endpointKey(e: { readonly address: string; readonly port: number }): string {
  return e.address.includes(':') ? `[${e.address}]:${e.port}` : `${e.address}:${e.port}`;
}

/**
 * Routable endpoints receive new traffic; unhealthy and draining ones never
 * do; terminating ones only while no endpoint of their service is healthy
 * (ServiceState.serves).
 */
export function isRoutable(e: Endpoint): boolean {
  return e.health === 'healthy';
}

export function sameEndpoint(a: Endpoint, b: Endpoint): boolean {
  if (
    a.address !== b.address ||
    a.port !== b.port ||
    a.health !== b.health ||
    a.weight !== b.weight ||
    a.network !== b.network ||
    a.node !== b.node ||
    a.cluster !== b.cluster ||
    a.locality.region !== b.locality.region ||
    a.locality.zone !== b.locality.zone ||
    a.locality.subzone !== b.locality.subzone
  ) {
    return false;
  }
  const ak = Object.keys(a.labels);
  if (ak.length !== Object.keys(b.labels).length) return false;
  return ak.every((k) => a.labels[k] === b.labels[k]);
}
