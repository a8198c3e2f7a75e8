/**
 * An Envoy sidecar's outbound listeners, one per group of domain/outbound.ts:
 * - transparent (stock bootstrap): the virtual outbound listener on
 *   0.0.0.0:15001 with use_original_dst, and per port a listener on
 *   0.0.0.0:PORT with bind_to_port false, which Envoy hands connections to by
 *   their original destination and never binds. TCP services on it are filter
 *   chains matched by destination (their VIP); HTTP/gRPC services one chain,
 *   HttpConnectionManager → RDS → router, told apart by authority in the route.
 * - local (`canopy.outbound_address`): the same chains on a bound local address.
 * A lazy sidecar on delta gets every HTTP/gRPC service in its listeners, and
 * its HCM runs Envoy's on_demand filter before the router: a request whose
 * route names a cluster it does not hold fetches it over ADS (on-demand CDS)
 * and goes on once it has arrived.
 */
import type { OutboundGroup } from '../domain/outbound.js';
import { routeNameOf } from '../domain/outbound.js';
import type { ServiceSpec } from '../domain/service.js';
import { encodeMessage } from '../wire/protos.js';

const HCM = 'envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager';
const ROUTER = 'envoy.extensions.filters.http.router.v3.Router';
const ON_DEMAND = 'envoy.extensions.filters.http.on_demand.v3.OnDemand';
/** How long a request waits for its on-demand Cluster (and its endpoints) before Envoy answers 503. */
const ON_DEMAND_TIMEOUT = { seconds: 5 };
const TCP_PROXY = 'envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy';
/** Where the virtual listener sends what no service listener takes: a cluster Canopy never defines, so Envoy closes it. */
export const BLACKHOLE_CLUSTER = 'BlackHoleCluster';

function any(typeName: string, value: object): { type_url: string; value: Uint8Array } {
  return { type_url: `type.googleapis.com/${typeName}`, value: encodeMessage(typeName, value) };
}

function tcpProxy(cluster: string, statPrefix = cluster): object {
  return {
    name: 'envoy.filters.network.tcp_proxy',
    typed_config: any(TCP_PROXY, { stat_prefix: statPrefix, cluster }),
  };
}

function httpConnectionManager(statPrefix: string, routeName: string, onDemand: boolean): object {
  const router = { name: 'envoy.filters.http.router', typed_config: any(ROUTER, {}) };
  const odcds = { source: { ads: {}, resource_api_version: 'V3' }, timeout: ON_DEMAND_TIMEOUT };
  const fetch = { name: 'envoy.filters.http.on_demand', typed_config: any(ON_DEMAND, { odcds }) };
  const hcm = any(HCM, {
    stat_prefix: statPrefix,
    // AUTO: HTTP/1.1, or HTTP/2 when the client opens with the prior-knowledge preface (gRPC).
    codec_type: 'AUTO',
    rds: { config_source: { ads: {}, resource_api_version: 'V3' }, route_config_name: routeName },
    http_filters: onDemand ? [fetch, router] : [router],
  });
  return { name: 'envoy.filters.network.http_connection_manager', typed_config: hcm };
}

function byDestination(spec: ServiceSpec): object {
  const vip = spec.vip!;
  return {
    name: spec.name,
    filter_chain_match: {
      prefix_ranges: [{ address_prefix: vip, prefix_len: { value: vip.includes(':') ? 128 : 32 } }],
    },
    filters: [tcpProxy(spec.name)],
  };
}

/**
 * A group's listener on `address`; `members` narrows it (lazy xDS) to the
 * services the client is to see, and is the group's own services otherwise.
 * `onDemand`: its HTTP chain fetches missing clusters (on-demand CDS).
 */
export function encodeGroupListener(
  group: OutboundGroup,
  address: string,
  members: ReadonlySet<string>,
  onDemand = false,
): Uint8Array {
  const http = group.http.filter((s) => members.has(s.name));
  const chains: object[] = group.tcpByVip.filter((s) => members.has(s.name)).map(byDestination);
  const statPrefix = group.name.includes('|') ? `outbound_${group.port}` : group.name;
  if (http.length > 0)
    chains.push({ name: 'outbound|http', filters: [httpConnectionManager(statPrefix, routeNameOf(group), onDemand)] });
  else if (group.tcp && members.has(group.tcp.name))
    chains.push({ name: group.tcp.name, filters: [tcpProxy(group.tcp.name)] });
  const transparent = group.mode === 'transparent';
  return encodeMessage('envoy.config.listener.v3.Listener', {
    name: group.name,
    address: { socket_address: { address, port_value: group.port } },
    ...(transparent ? { bind_to_port: { value: false } } : {}),
    traffic_direction: 'OUTBOUND',
    filter_chains: chains,
  });
}

/** The listener captured traffic arrives on; Envoy hands each connection to its original destination's listener. */
export function encodeVirtualOutbound(name: string, port: number): Uint8Array {
  return encodeMessage('envoy.config.listener.v3.Listener', {
    name,
    address: { socket_address: { address: '0.0.0.0', port_value: port } },
    use_original_dst: { value: true },
    traffic_direction: 'OUTBOUND',
    filter_chains: [{ name: 'blackhole', filters: [tcpProxy(BLACKHOLE_CLUSTER)] }],
  });
}
