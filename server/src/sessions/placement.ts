/**
 * Where a client is, from its xDS node: the locality from node.locality, the
 * other scopes and labels from node.metadata. Canopy's own keys come first;
 * Istio's spellings are read too, so existing sidecar bootstraps work as-is.
 */
import { CLIENT_KINDS, type Client, type ClientKind } from '../domain/client.js';
import { isIp } from '../domain/ip.js';
import type { NodeInfo } from '../wire/request.js';

/** Node metadata keys a bootstrap can set (documented in docs/envoy.md, "Envoy sidecars"). */
export const CLIENT_KIND_KEY = 'canopy.client_kind';
export const OUTBOUND_ADDRESS_KEY = 'canopy.outbound_address';
/** Without an outbound address: the port traffic is captured to (the virtual outbound listener's). */
export const VIRTUAL_OUTBOUND_PORT_KEY = 'canopy.virtual_outbound_port';
/** An Envoy's own service: what its `local_cluster` (zone-aware routing) holds. */
export const LOCAL_SERVICE_KEY = 'canopy.local_service';
/**
 * A Kuma client's inbound tags (a Struct of strings): Kuma before 2.10 read a
 * client's affinity values from them, so they win over `labels` of the same key.
 */
export const INBOUND_TAGS_KEY = 'canopy.inbound_tags';
/** `false` (or "false"): this Envoy takes full CLAs even on a delta stream. */
export const LEDS_KEY = 'canopy.leds';

/** Whether a node on a delta stream takes LEDS: an Envoy that has not opted out. */
export function wantsLeds(node: NodeInfo | undefined): boolean {
  const opt = node?.metadata[LEDS_KEY];
  return clientKindOf(node) === 'envoy' && opt !== false && opt !== 'false';
}

/**
 * The kind of client: the explicit metadata key wins; otherwise Envoy says
 * `user_agent_name: envoy` and Canopy's agent `canopy-agent`; anything else
 * is proxyless gRPC (which is what every client was before kinds existed).
 */
export function clientKindOf(node: NodeInfo | undefined): ClientKind {
  const explicit = node?.metadata[CLIENT_KIND_KEY];
  if (typeof explicit === 'string' && (CLIENT_KINDS as readonly string[]).includes(explicit))
    return explicit as ClientKind;
  const agent = node?.userAgentName ?? '';
  if (agent === 'envoy') return 'envoy';
  if (agent === 'canopy-agent') return 'agent';
  return 'grpc';
}

export function placementOf(node: NodeInfo | undefined): Client {
  const md = node?.metadata ?? {};
  const outbound = str(md[OUTBOUND_ADDRESS_KEY]);
  const virtualPort = port(md[VIRTUAL_OUTBOUND_PORT_KEY]);
  const localService = str(md[LOCAL_SERVICE_KEY]);
  const podLabels = labels(md['labels']) ?? labels(md['LABELS']) ?? {};
  const tags = labels(md[INBOUND_TAGS_KEY]);
  const nodeLabels = tags ? { ...podLabels, ...tags } : podLabels;
  // Istio's topology labels name the network and cluster when NETWORK/CLUSTER_ID are not set (as explain reads them).
  const label = (k: string) => (Object.hasOwn(nodeLabels, k) ? nodeLabels[k] : undefined);
  return {
    kind: clientKindOf(node),
    ...(outbound !== undefined && isIp(outbound) ? { outboundAddress: outbound } : {}),
    ...(virtualPort !== undefined ? { virtualOutboundPort: virtualPort } : {}),
    ...(localService ? { localService } : {}),
    locality: {
      region: node?.locality.region ?? '',
      zone: node?.locality.zone ?? '',
      subzone: node?.locality.subzone ?? '',
    },
    network: str(md['network']) ?? str(md['NETWORK']) ?? label('topology.istio.io/network') ?? '',
    node: str(md['node']) ?? str(md['NODE_NAME']) ?? '',
    cluster: str(md['cluster']) ?? str(md['CLUSTER_ID']) ?? label('topology.istio.io/cluster') ?? '',
    labels: nodeLabels,
  };
}

/** A port from Struct metadata: a number, or a string of digits (bootstraps write either). */
function port(v: unknown): number | undefined {
  const n = typeof v === 'number' ? v : typeof v === 'string' && /^\d+$/.test(v) ? Number(v) : NaN;
  return Number.isInteger(n) && n >= 1 && n <= 65535 ? n : undefined;
}

function str(v: unknown): string | undefined {
  return typeof v === 'string' ? v : undefined;
}

function labels(v: unknown): Record<string, string> | undefined {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return undefined;
  // fromEntries defines own properties, so a "__proto__" label stays a label.
  return Object.fromEntries(Object.entries(v).filter((e): e is [string, string] => typeof e[1] === 'string'));
}
