/**
 * An Envoy sidecar's Cluster for one service: EDS over ADS, the locality
 * weights Canopy computes honoured (locality_weighted_lb_config), HTTP/2 to
 * gRPC backends, the service's connect timeout, and its outlier detection and
 * active health checks when configured.
 */
import type { ZoneAware } from '../domain/policy.js';
import type { ServiceSpec } from '../domain/service.js';
import { upstreamOf, type HealthCheck, type OutlierDetection, type Protocol } from '../domain/upstream.js';
import { encodeMessage } from '../wire/protos.js';
import { withLoadAssignment, type DnsClusterParts } from './dns-cluster.js';

const HTTP_OPTIONS = 'envoy.extensions.upstreams.http.v3.HttpProtocolOptions';

function duration(ms: number): { seconds?: number; nanos?: number } {
  const seconds = Math.floor(ms / 1000);
  const nanos = (ms % 1000) * 1_000_000;
  // Zero fields left out: a proto3 default is not written.
  return { ...(seconds ? { seconds } : {}), ...(nanos ? { nanos } : {}) };
}

function outlier(od: OutlierDetection): object {
  return {
    consecutive_5xx: { value: od.consecutive5xx },
    interval: duration(od.intervalMs),
    base_ejection_time: duration(od.baseEjectionTimeMs),
    max_ejection_percent: { value: od.maxEjectionPercent },
  };
}

function healthCheck(hc: HealthCheck, protocol: Protocol): object {
  const probe =
    protocol === 'grpc'
      ? { grpc_health_check: { service_name: hc.grpcServiceName } }
      : protocol === 'http'
        ? { http_health_check: { path: hc.path } }
        : { tcp_health_check: {} };
  return {
    timeout: duration(hc.timeoutMs),
    interval: duration(hc.intervalMs),
    unhealthy_threshold: { value: hc.unhealthyThreshold },
    healthy_threshold: { value: hc.healthyThreshold },
    ...probe,
  };
}

/**
 * Locality weights, or Envoy's zone-aware routing inside priority 0 when the
 * policy asks for it (Istio's zoneAwareLbSetting: min_cluster_size, and
 * routing 0% when disabled); Envoy takes one or the other.
 */
function commonLbConfig(zoneAware: ZoneAware | undefined): object {
  if (!zoneAware) return { locality_weighted_lb_config: {} };
  return {
    zone_aware_lb_config: {
      ...(zoneAware.minClusterSize !== undefined ? { min_cluster_size: { value: zoneAware.minClusterSize } } : {}),
      ...(zoneAware.enabled ? {} : { routing_enabled: { value: 0 } }),
    },
  };
}

/** `dns`: a service with hostname endpoints, which Envoy resolves itself (dns-cluster.ts), instead of EDS. */
export function encodeEnvoyCluster(spec: ServiceSpec, dns?: DnsClusterParts): Uint8Array {
  const up = upstreamOf(spec);
  const http2 =
    up.protocol === 'grpc'
      ? {
          typed_extension_protocol_options: {
            [HTTP_OPTIONS]: {
              type_url: `type.googleapis.com/${HTTP_OPTIONS}`,
              value: encodeMessage(HTTP_OPTIONS, { explicit_http_config: { http2_protocol_options: {} } }),
            },
          },
        }
      : {};
  const discovery = dns?.fields ?? {
    type: 'EDS',
    eds_cluster_config: { eds_config: { ads: {}, resource_api_version: 'V3' }, service_name: spec.name },
  };
  const bytes = encodeMessage('envoy.config.cluster.v3.Cluster', {
    name: spec.name,
    ...discovery,
    connect_timeout: duration(up.connectTimeoutMs),
    lb_policy: 'ROUND_ROBIN',
    common_lb_config: commonLbConfig(spec.loadBalancing.policy?.zoneAware),
    ...http2,
    ...(up.outlierDetection ? { outlier_detection: outlier(up.outlierDetection) } : {}),
    ...(up.healthCheck ? { health_checks: [healthCheck(up.healthCheck, up.protocol)] } : {}),
    // No lrs_server: Envoy reports load through its bootstrap's cluster_manager.load_stats_config (1.40 does not
    // implement a Cluster's lrs_server, envoyproxy/envoy#43326; one that did would report the same load twice).
  });
  return dns ? withLoadAssignment(bytes, dns.loadAssignment) : bytes;
}

/** What the Envoy cluster's bytes depend on, to re-encode only when it changes. */
export function envoyClusterShape(spec: ServiceSpec): string {
  return JSON.stringify([upstreamOf(spec), spec.loadBalancing.policy?.zoneAware ?? null]);
}
