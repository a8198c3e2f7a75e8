/**
 * CSDS (envoy.service.status.v3.ClientStatusDiscoveryService) from the same
 * state /debug/clients shows, as proto-named plain objects for the transport
 * to encode: one ClientConfig per connected stream, and per resource
 * - `version_info`: the version the client acknowledged (ACKED, and NACKED:
 *   what it keeps), or the one sent and not yet acknowledged (STALE); on SotW
 *   the version_info of the response that brought it, on delta its own;
 * - `config_status`: SYNCED (acknowledged), STALE (sent, waiting for the ACK
 *   or NACK), ERROR (NACKed, with `error_state`), NOT_SENT (nothing sent);
 * - `last_updated`: when its current content was sent;
 * - `xds_config`: the resource as sent (an Any), unless the request sets
 *   `exclude_resource_contents`.
 * An empty request (what grpcdebug sends) gets every stream; `node_matchers`
 * filter by node id. Two streams of one node id are told apart by
 * `client_scope` (protocol, stream id and peer).
 */
import { messageType } from '../wire/protos.js';
import { flatten } from '../wire/rope.js';
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
  /** Leave out each resource's body (`xds_config`). */
  readonly exclude_resource_contents?: boolean;
}

interface Timestamp {
  readonly seconds: number;
  readonly nanos: number;
}

export interface GenericXdsConfig {
  readonly type_url: string;
  readonly name: string;
  readonly version_info: string;
  readonly config_status: 'SYNCED' | 'NOT_SENT' | 'STALE' | 'ERROR';
  readonly client_status: ResourceStatus['state'];
  readonly last_updated?: Timestamp;
  readonly xds_config?: { readonly type_url: string; readonly value: Uint8Array };
  readonly error_state?: {
    readonly details: string;
    readonly version_info: string;
    readonly last_update_attempt: Timestamp;
  };
}

export interface ClientConfig {
  readonly node: {
    readonly id: string;
    readonly cluster: string;
    readonly locality: { readonly region: string; readonly zone: string; readonly sub_zone: string };
    readonly user_agent_name?: string;
  };
  readonly generic_xds_configs: GenericXdsConfig[];
  /** Set when the node id has more than one stream: which one this is. */
  readonly client_scope?: string;
}

/** The ClientStatusResponse for these clients, filtered by the request's node matchers (none: all). */
export function clientStatusResponse(
  clients: readonly ClientStatus[],
  req: ClientStatusRequest,
): { config: ClientConfig[] } {
  const matchers = (req.node_matchers ?? []).map((m) => m.node_id).filter((m) => m !== undefined);
  const chosen = clients.filter((c) => matchers.length === 0 || matchers.some((m) => matches(m, c.nodeId)));
  const streams = new Map<string, number>();
  for (const c of chosen) streams.set(c.nodeId, (streams.get(c.nodeId) ?? 0) + 1);
  const bodies = req.exclude_resource_contents !== true;
  const config = chosen.map((c): ClientConfig => {
    const { region, zone, subzone } = c.placement.locality;
    const agent = c.userAgent;
    const generic: GenericXdsConfig[] = [];
    for (const t of c.types) for (const r of t.resources ?? []) generic.push(genericConfig(t, r, bodies));
    return {
      node: {
        id: c.nodeId,
        cluster: c.cluster,
        locality: { region, zone, sub_zone: subzone },
        ...(agent ? { user_agent_name: agent } : {}),
      },
      generic_xds_configs: generic,
      ...((streams.get(c.nodeId) ?? 0) > 1
        ? { client_scope: `${c.protocol ?? 'sotw'} stream ${c.streamId} from ${c.peer}` }
        : {}),
    };
  });
  return { config };
}

function genericConfig(t: TypeStatus, r: ResourceStatus, bodies: boolean): GenericXdsConfig {
  const sent = r.version !== '';
  const config_status =
    r.state === 'ACKED'
      ? 'SYNCED'
      : r.state === 'NACKED'
        ? 'ERROR'
        : r.state === 'REQUESTED' && sent
          ? 'STALE'
          : 'NOT_SENT';
  // What the client runs: the version it acknowledged; while one is in flight, the one sent.
  const version_info = r.state === 'NACKED' ? (r.acked ?? '') : r.version;
  const body = bodies && sent ? r.body?.() : undefined;
  const base: GenericXdsConfig = {
    type_url: t.typeUrl,
    name: r.name,
    version_info,
    client_status: r.state,
    config_status,
    ...(r.sentAt ? { last_updated: timestamp(Date.parse(r.sentAt)) } : {}),
    ...(body ? { xds_config: unpackAny(body) } : {}),
  };
  if (r.state !== 'NACKED' || !t.lastNack) return base;
  return {
    ...base,
    error_state: {
      details: t.lastNack.detail,
      version_info: r.version,
      last_update_attempt: timestamp(Date.parse(t.lastNack.at)),
    },
  };
}

/** The resource's google.protobuf.Any as {type_url, value}, for protobufjs to encode into xds_config. */
function unpackAny(any: Uint8Array): { type_url: string; value: Uint8Array } {
  const t = messageType('google.protobuf.Any');
  const m = t.toObject(t.decode(flatten(any))) as { type_url: string; value: Uint8Array };
  return { type_url: m.type_url, value: m.value };
}

function timestamp(ms: number): Timestamp {
  return { seconds: Math.floor(ms / 1000), nanos: (ms % 1000) * 1e6 };
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
