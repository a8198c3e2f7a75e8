/**
 * Clusters for a service with hostname endpoints (domain/dns-spec.ts). Such a
 * service has no EDS: its endpoints travel inside the Cluster.
 *
 * - An Envoy sidecar gets a STRICT_DNS cluster (LOGICAL_DNS for `dns.resolution:
 *   logical`, Istio's DNS_ROUND_ROBIN) whose `load_assignment` is the client's
 *   own ClusterLoadAssignment, the same priorities and locality weights an EDS
 *   cluster's CLA would carry for that client, as istiod builds DNS clusters
 *   per proxy. Envoy resolves the names itself (`respect_dns_ttl`).
 * - A proxyless gRPC client gets what gRFC A37 gives it: LOGICAL_DNS, one name
 *   per cluster. One endpoint: one LOGICAL_DNS cluster. Several: an aggregate
 *   cluster over one LOGICAL_DNS cluster per endpoint, in the client's
 *   priority order; gRPC tries them in that order, so endpoints that share a
 *   priority become successive fallbacks and locality weights are lost.
 */
import type { Cla } from '../domain/cla.js';
import { dnsOf } from '../domain/dns-spec.js';
import type { ServiceState } from '../domain/mesh.js';
import { endpointKey, isRoutable, type Endpoint, type ServiceSpec } from '../domain/service.js';
import { encodeMessage, messageType } from '../wire/protos.js';
import { flatten, type Bytes } from '../wire/rope.js';
import { fieldSize, utf8Bytes, varintSize, WireWriter } from '../wire/wire.js';

const CLUSTER = 'envoy.config.cluster.v3.Cluster';
const AGGREGATE = 'envoy.extensions.clusters.aggregate.v3.ClusterConfig';
/** The name a child LOGICAL_DNS cluster of an aggregate carries: `service/dns/host:port` ('/' is not in service names). */
const CHILD = '/dns/';

/**
 * Is this service served with DNS clusters (some endpoint is a hostname)? The state keeps the count per
 * change: every push asks this of every changed service, and a scan was O(endpoints) per change.
 */
export function isDnsService(service: ServiceState): boolean {
  return service.hasHostnames;
}

/** What the Envoy cluster takes instead of EDS: the discovery fields and the client's CLA. */
export interface DnsClusterParts {
  readonly fields: object;
  /** An encoded ClusterLoadAssignment. */
  readonly loadAssignment: Uint8Array;
}

function duration(ms: number): { seconds?: number; nanos?: number } {
  const seconds = Math.floor(ms / 1000);
  const nanos = (ms % 1000) * 1_000_000;
  return { ...(seconds ? { seconds } : {}), ...(nanos ? { nanos } : {}) };
}

function endpointMessage(e: Endpoint, withHealth: boolean): object {
  return {
    endpoint: { address: { socket_address: { address: e.address, port_value: e.port } } },
    ...(withHealth && !isRoutable(e) ? { health_status: 'UNHEALTHY' } : {}),
    load_balancing_weight: { value: e.weight },
  };
}

function singleEndpointCla(clusterName: string, e: Endpoint, withHealth: boolean): object {
  const { region, zone, subzone } = e.locality;
  return {
    cluster_name: clusterName,
    endpoints: [
      {
        locality: { region, zone, sub_zone: subzone },
        lb_endpoints: [endpointMessage(e, withHealth)],
        load_balancing_weight: { value: e.weight },
      },
    ],
  };
}

/**
 * The Envoy sidecar's parts. `cla` is the client's CLA (encoded): STRICT_DNS
 * carries it whole; LOGICAL_DNS carries the service's one endpoint (Envoy
 * takes exactly one), with its health.
 */
export function envoyDnsParts(service: ServiceState, claBytes: Uint8Array): DnsClusterParts {
  const dns = dnsOf(service.spec);
  const fields = {
    type: dns.resolution === 'logical' ? 'LOGICAL_DNS' : 'STRICT_DNS',
    dns_lookup_family: dns.lookupFamily,
    respect_dns_ttl: true,
    dns_refresh_rate: duration(dns.refreshRateMs),
  };
  const only = dns.resolution === 'logical' ? service.endpoints.values().next().value : undefined;
  const loadAssignment = only
    ? encodeMessage('envoy.config.endpoint.v3.ClusterLoadAssignment', singleEndpointCla(service.name, only, true))
    : claBytes;
  return { fields, loadAssignment };
}

/** The ClusterLoadAssignment inside an encoded Any (the EDS resource an Envoy would be sent). */
export function claOfAny(any: Bytes): Uint8Array {
  return (messageType('google.protobuf.Any').decode(flatten(any)) as unknown as { value: Uint8Array }).value;
}

/** Appends `load_assignment` (Cluster field 33) to an encoded Cluster: a field may come in any order. */
export function withLoadAssignment(cluster: Uint8Array, cla: Uint8Array): Uint8Array {
  const size = cluster.length + varintSize((33 << 3) | 2) + varintSize(cla.length) + cla.length;
  const w = new WireWriter(size);
  w.buf.set(cluster, 0);
  w.pos = cluster.length;
  w.bytes(33, cla);
  return w.finish();
}

/** The child cluster name of one endpoint of a service. */
export function dnsChildName(service: string, e: { readonly address: string; readonly port: number }): string {
  return `${service}${CHILD}${endpointKey(e)}`;
}

/** The service and endpoint key a child cluster name stands for, or undefined for any other name. */
export function parseDnsChildName(name: string): { service: string; key: string } | undefined {
  const at = name.indexOf(CHILD);
  return at > 0 ? { service: name.slice(0, at), key: name.slice(at + CHILD.length) } : undefined;
}

/** The child cluster names a change to this service may touch (every endpoint it has now). */
export function dnsChildNames(service: ServiceState): string[] {
  return [...service.endpoints.values()].map((e) => dnsChildName(service.name, e));
}

function logicalDnsCluster(name: string, e: Endpoint): Uint8Array {
  return encodeMessage(CLUSTER, {
    name,
    type: 'LOGICAL_DNS',
    lb_policy: 'ROUND_ROBIN',
    connect_timeout: { seconds: 1 },
    load_assignment: singleEndpointCla(name, e, false),
  });
}

/** A child LOGICAL_DNS cluster of an aggregate, or undefined when the service has no such endpoint. */
export function proxylessDnsChild(name: string, service: ServiceState, key: string): Uint8Array | undefined {
  const e = service.endpoints.get(key);
  return e ? logicalDnsCluster(name, e) : undefined;
}

/** The endpoints a client's CLA holds, best priority first (the order of the CLA's groups within a priority). */
function inPriorityOrder(cla: Cla): Endpoint[] {
  const groups = [...cla.groups].sort((a, b) => a.priority - b.priority);
  return groups.flatMap((g) => g.endpoints);
}

/**
 * The proxyless client's cluster `name`; undefined when its CLA holds no
 * endpoint (an aggregate needs a child: the caller sends the plain EDS
 * cluster, whose empty CLA fails calls as UNAVAILABLE).
 */
export function proxylessDnsCluster(name: string, service: ServiceState, cla: Cla): Uint8Array | undefined {
  const order = inPriorityOrder(cla);
  if (order.length === 0) return undefined;
  if (service.endpoints.size === 1) return logicalDnsCluster(name, order[0]!);
  // envoy.extensions.clusters.aggregate.v3.ClusterConfig is `repeated string clusters = 1`.
  const children = order.map((e) => utf8Bytes(dnsChildName(service.name, e)));
  const config = new WireWriter(children.reduce((n, c) => n + fieldSize(1, c.length), 0));
  for (const c of children) config.bytes(1, c);
  return encodeMessage(CLUSTER, {
    name,
    cluster_type: {
      name: 'envoy.clusters.aggregate',
      typed_config: { type_url: `type.googleapis.com/${AGGREGATE}`, value: config.finish() },
    },
    // gRPC ignores an aggregate's policy (A37) but accepts only the policies it knows.
    lb_policy: 'ROUND_ROBIN',
    connect_timeout: { seconds: 1 },
  });
}

/** The part of a DNS service's Envoy cluster that depends on its settings (for the cluster cache's shape). */
export function dnsShape(spec: ServiceSpec): string {
  return JSON.stringify(dnsOf(spec));
}
