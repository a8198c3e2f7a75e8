/**
 * LoadReportingService messages (envoy.service.load_stats.v3), through
 * protobufjs with Envoy's lrs.proto: one request per client per interval,
 * not a hot path.
 */
import { messageType } from './protos.js';
import { nodeInfo, type NodeInfo, type RawNode } from './request.js';

export interface UpstreamLocalityStats {
  readonly locality: { readonly region: string; readonly zone: string; readonly subzone: string };
  readonly issued: number;
  readonly succeeded: number;
  readonly errors: number;
  readonly inProgress: number;
}

export interface ClusterStats {
  readonly clusterName: string;
  readonly serviceName: string;
  /** The interval these counts cover, as the client measured it. */
  readonly intervalSeconds: number;
  readonly upstream: readonly UpstreamLocalityStats[];
  /** Requests the client dropped before choosing a locality (Envoy: no healthy upstream, drop_overloads). */
  readonly dropped: number;
}

export interface LoadStatsRequest {
  readonly node?: NodeInfo;
  readonly clientFeatures: readonly string[];
  readonly clusterStats: readonly ClusterStats[];
}

interface RawLocalityStats {
  locality?: { region?: string; zone?: string; sub_zone?: string };
  total_successful_requests?: number;
  total_requests_in_progress?: number;
  total_error_requests?: number;
  total_issued_requests?: number;
}

interface RawRequest {
  node?: RawNode & { client_features?: string[] };
  cluster_stats?: {
    cluster_name?: string;
    cluster_service_name?: string;
    upstream_locality_stats?: RawLocalityStats[];
    total_dropped_requests?: number;
    load_report_interval?: { seconds?: number; nanos?: number };
  }[];
}

export function decodeLoadStatsRequest(buf: Uint8Array): LoadStatsRequest {
  const type = messageType('envoy.service.load_stats.v3.LoadStatsRequest');
  const raw = type.toObject(type.decode(buf), { longs: Number, enums: String }) as RawRequest;
  return {
    ...(raw.node ? { node: nodeInfo(raw.node) } : {}),
    clientFeatures: raw.node?.client_features ?? [],
    clusterStats: (raw.cluster_stats ?? []).map((c) => ({
      clusterName: c.cluster_name ?? '',
      serviceName: c.cluster_service_name ?? '',
      dropped: c.total_dropped_requests ?? 0,
      intervalSeconds: (c.load_report_interval?.seconds ?? 0) + (c.load_report_interval?.nanos ?? 0) / 1e9,
      upstream: (c.upstream_locality_stats ?? []).map((u) => ({
        locality: {
          region: u.locality?.region ?? '',
          zone: u.locality?.zone ?? '',
          subzone: u.locality?.sub_zone ?? '',
        },
        issued: u.total_issued_requests ?? 0,
        succeeded: u.total_successful_requests ?? 0,
        errors: u.total_error_requests ?? 0,
        inProgress: u.total_requests_in_progress ?? 0,
      })),
    })),
  };
}

export function encodeLoadStatsResponse(r: {
  clusters: readonly string[];
  sendAllClusters: boolean;
  intervalMs: number;
}): Buffer {
  const type = messageType('envoy.service.load_stats.v3.LoadStatsResponse');
  const value = {
    clusters: r.sendAllClusters ? [] : [...r.clusters],
    send_all_clusters: r.sendAllClusters,
    load_reporting_interval: { seconds: Math.floor(r.intervalMs / 1000), nanos: (r.intervalMs % 1000) * 1e6 },
    report_endpoint_granularity: false,
  };
  return Buffer.from(type.encode(type.fromObject(value)).finish());
}
