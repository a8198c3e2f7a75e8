/**
 * An Envoy sidecar's RouteConfiguration for the HTTP/gRPC services of one
 * outbound listener (domain/outbound.ts): a virtual host per service, matched
 * by authority as istiod does (name, name:port, VIP, VIP:port), every request
 * to the service's cluster. A domain may appear once in a RouteConfiguration
 * (Envoy rejects it otherwise), so one claimed by an earlier service is left
 * out; `*` only when the listener has one HTTP service, so an authority
 * nothing else claims (127.0.0.1:15001) still reaches it.
 * Routes carry the service's timeout (0, disabled, by default: Envoy's own
 * default of 15 s would cut server streaming), idle timeout and retries.
 */
import { authoritiesOf, type OutboundMode } from '../domain/outbound.js';
import type { ServiceSpec } from '../domain/service.js';
import { routeOf, upstreamOf, type RetryPolicy } from '../domain/upstream.js';
import { encodeMessage } from '../wire/protos.js';

function duration(ms: number): { seconds?: number; nanos?: number } {
  const seconds = Math.floor(ms / 1000);
  const nanos = (ms % 1000) * 1_000_000;
  // A present Duration with zero fields is 0 s: the field is still set.
  return { ...(seconds ? { seconds } : {}), ...(nanos ? { nanos } : {}) };
}

function retryPolicy(r: RetryPolicy): object {
  return {
    retry_on: r.retryOn.join(','),
    num_retries: { value: r.attempts },
    ...(r.perTryTimeoutMs !== undefined ? { per_try_timeout: duration(r.perTryTimeoutMs) } : {}),
  };
}

function routeAction(spec: ServiceSpec): object {
  const route = routeOf(spec);
  return {
    cluster: spec.name,
    timeout: duration(route.timeoutMs),
    ...(route.idleTimeoutMs !== undefined ? { idle_timeout: duration(route.idleTimeoutMs) } : {}),
    ...(route.retries ? { retry_policy: retryPolicy(route.retries) } : {}),
    // gRPC: a client's grpc-timeout header bounds the call (0 = no cap on it), as istiod sets it.
    ...(upstreamOf(spec).protocol === 'grpc' ? { max_stream_duration: { grpc_timeout_header_max: {} } } : {}),
  };
}

export function encodeEnvoyRouteConfiguration(
  name: string,
  services: readonly ServiceSpec[],
  mode: OutboundMode,
): Uint8Array {
  const claimed = new Set<string>();
  const virtualHosts = services.map((spec) => {
    const local = mode === 'local' ? spec.outboundPort : undefined;
    const domains = authoritiesOf(spec, local).filter((d) => !claimed.has(d));
    for (const d of domains) claimed.add(d);
    if (services.length === 1) domains.push('*');
    return { name: spec.name, domains, routes: [{ match: { prefix: '' }, route: routeAction(spec) }] };
  });
  return encodeMessage('envoy.config.route.v3.RouteConfiguration', { name, virtual_hosts: virtualHosts });
}
