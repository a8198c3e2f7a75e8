/**
 * An Envoy sidecar's outbound listener for one service: bound on the
 * sidecar's local outbound address at the service's outboundPort (or port),
 * else on the service's VIP:port. HTTP and gRPC services go through an
 * HttpConnectionManager → RDS (the service's RouteConfiguration over ADS) →
 * router; `protocol: tcp` services through tcp_proxy to the service's cluster.
 */
import type { Client } from '../domain/client.js';
import type { ServiceSpec } from '../domain/service.js';
import { upstreamOf } from '../domain/upstream.js';
import { encodeMessage } from '../wire/protos.js';

const HCM = 'envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager';
const ROUTER = 'envoy.extensions.filters.http.router.v3.Router';
const TCP_PROXY = 'envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy';

export interface ListenerBind {
  readonly address: string;
  readonly port: number;
}

/** Where a sidecar binds its listener for this service; undefined when it has nowhere to (no port). */
export function outboundBind(spec: ServiceSpec, client: Client): ListenerBind | undefined {
  const port = client.outboundAddress !== undefined ? (spec.outboundPort ?? spec.port) : spec.port;
  if (port === undefined) return undefined;
  if (client.outboundAddress !== undefined) return { address: client.outboundAddress, port };
  return spec.vip !== undefined ? { address: spec.vip, port } : undefined;
}

function any(typeName: string, value: object): { type_url: string; value: Uint8Array } {
  return { type_url: `type.googleapis.com/${typeName}`, value: encodeMessage(typeName, value) };
}

function networkFilter(spec: ServiceSpec): object {
  const name = spec.name;
  if (upstreamOf(spec).protocol === 'tcp') {
    return {
      name: 'envoy.filters.network.tcp_proxy',
      typed_config: any(TCP_PROXY, { stat_prefix: name, cluster: name }),
    };
  }
  const hcm = any(HCM, {
    stat_prefix: name,
    // AUTO: HTTP/1.1, or HTTP/2 when the client opens with the prior-knowledge preface (gRPC).
    codec_type: 'AUTO',
    rds: { config_source: { ads: {}, resource_api_version: 'V3' }, route_config_name: name },
    http_filters: [{ name: 'envoy.filters.http.router', typed_config: any(ROUTER, {}) }],
  });
  return { name: 'envoy.filters.network.http_connection_manager', typed_config: hcm };
}

export function encodeEnvoyListener(spec: ServiceSpec, bind: ListenerBind): Uint8Array {
  return encodeMessage('envoy.config.listener.v3.Listener', {
    name: spec.name,
    address: { socket_address: { address: bind.address, port_value: bind.port } },
    traffic_direction: 'OUTBOUND',
    filter_chains: [{ filters: [networkFilter(spec)] }],
  });
}
