/**
 * CSDS (envoy.service.status.v3.ClientStatusDiscoveryService) from the same
 * state /debug/clients shows: one ClientConfig per connected node, with each
 * resource's version, status and last error, as proto-named plain objects for
 * the transport to encode.
 */
import type { ClientStatus, ResourceStatus, TypeStatus } from './client-status.js';

/** The node_id matcher of a ClientStatusRequest (envoy.type.matcher.v3.StringMatcher), as decoded. */
export interface NodeIdMatcher {
  readonly exact?: string;
  readonly prefix?: string;
  readonly suffix?: string;
  readonly contains?: string;
  readonly safe_regex?: { readonly regex?: string };
  readonly ignore_case?: boolean;
}

export interface ClientStatusRequest {
  readonly node_matchers?: readonly { readonly node_id?: NodeIdMatcher }[];
}

interface Timestamp {
  readonly seconds: number;
  readonly nanos: number;
}

export interface GenericXdsConfig {
  readonly type_url: string;
  readonly name: string;
  readonly version_info: string;
  readonly config_status: 'SYNCED' | 'NOT_SENT' | 'ERROR';
  readonly client_status: ResourceStatus['state'];
  readonly error_state?: { readonly details: string; readonly version_info: string; readonly last_update_attempt: Timestamp };
}

export interface ClientConfig {
  readonly node: {
    readonly id: string;
    readonly cluster: string;
    readonly locality: { readonly region: string; readonly zone: string; readonly sub_zone: string };
  };
  readonly generic_xds_configs: GenericXdsConfig[];
}

/** The ClientStatusResponse for these clients, filtered by the request's node matchers (none: all). */
export function clientStatusResponse(
  clients: readonly ClientStatus[],
  req: ClientStatusRequest,
): { config: ClientConfig[] } {
  const matchers = (req.node_matchers ?? []).map((m) => m.node_id).filter((m) => m !== undefined);
  const byNode = new Map<string, ClientConfig>();
  for (const c of clients) {
    if (matchers.length > 0 && !matchers.some((m) => matches(m, c.nodeId))) continue;
    let config = byNode.get(c.nodeId);
    if (!config) {
      const { region, zone, subzone } = c.placement.locality;
      config = { node: { id: c.nodeId, cluster: c.cluster, locality: { region, zone, sub_zone: subzone } }, generic_xds_configs: [] };
      byNode.set(c.nodeId, config);
    }
    for (const t of c.types) for (const r of t.resources ?? []) config.generic_xds_configs.push(genericConfig(t, r));
  }
  return { config: [...byNode.values()] };
}

function genericConfig(t: TypeStatus, r: ResourceStatus): GenericXdsConfig {
  const base = {
    type_url: t.typeUrl,
    name: r.name,
    version_info: r.version,
    client_status: r.state,
    config_status: r.state === 'ACKED' ? 'SYNCED' : r.state === 'NACKED' ? 'ERROR' : 'NOT_SENT',
  } as const;
  if (r.state !== 'NACKED' || !t.lastNack) return base;
  const ms = Date.parse(t.lastNack.at);
  return {
    ...base,
    error_state: {
      details: t.lastNack.detail,
      version_info: t.lastNack.version,
      last_update_attempt: { seconds: Math.floor(ms / 1000), nanos: (ms % 1000) * 1e6 },
    },
  };
}

function matches(m: NodeIdMatcher, id: string): boolean {
  const fold = (s: string): string => (m.ignore_case ? s.toLowerCase() : s);
  const v = fold(id);
  if (m.exact !== undefined) return v === fold(m.exact);
  if (m.prefix !== undefined) return v.startsWith(fold(m.prefix));
  if (m.suffix !== undefined) return v.endsWith(fold(m.suffix));
  if (m.contains !== undefined) return v.includes(fold(m.contains));
  if (m.safe_regex?.regex !== undefined) return new RegExp(`^(?:${m.safe_regex.regex})$`).test(id);
  return true;
}
