/**
 * Who is asking: where a client runs (its Placement) and what kind of xDS
 * client it is, since the same service yields resources suited to each kind.
 * - `grpc`: proxyless gRPC; resolves `xds:///NAME` through an api_listener.
 * - `envoy`: a sidecar; binds real outbound listeners and drains endpoints
 *   it is told are draining.
 * - `agent`: Canopy's node agent; asks for locality trees only.
 * Pure.
 */
import type { DemandSet } from './demand.js';
import type { Placement } from './locality.js';

export type ClientKind = 'grpc' | 'envoy' | 'agent';
export const CLIENT_KINDS: readonly ClientKind[] = ['grpc', 'envoy', 'agent'];

export interface Client extends Placement {
  /** Absent: `grpc`, today's behaviour for every client. */
  readonly kind?: ClientKind;
  /**
   * An Envoy sidecar's local outbound address (e.g. 127.0.0.1): its listener
   * for a service binds here on the service's outboundPort (or port) instead
   * of the service's VIP.
   */
  readonly outboundAddress?: string;
  /**
   * Without an outbound address: the port of the sidecar's virtual outbound
   * listener (use_original_dst), where its traffic is captured; absent = 15001.
   */
  readonly virtualOutboundPort?: number;
  /** Lazy xDS: the services this node gets in wildcard LDS/CDS; absent = all of them. */
  readonly demand?: DemandSet;
  /**
   * An Envoy sidecar on a delta stream that takes LEDS: its CLAs name one
   * endpoint collection per locality piece instead of listing endpoints.
   */
  readonly leds?: boolean;
  /**
   * A lazy Envoy sidecar on a delta stream: its HTTP/gRPC outbound listeners and routes hold every service,
   * and what its CDS lacks is fetched on the first request (Envoy's on_demand filter, on-demand CDS).
   */
  readonly onDemand?: boolean;
  /** An Envoy sidecar's own service (node metadata `canopy.local_service`): its local cluster for zone-aware routing. */
  readonly localService?: string;
}

export function kindOf(client: Client): ClientKind {
  return client.kind ?? 'grpc';
}
