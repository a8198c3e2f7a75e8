/**
 * The node agent's LRS client: envoy.service.load_stats.v3.LoadReportingService
 * /StreamLoadStats to Canopy's xDS port, as Envoy and gRPC clients report.
 * The first request names the agent's node (and so its locality); Canopy
 * answers with the clusters to report and the interval; every interval the
 * agent reports, per cluster (a load-aware service) and upstream locality,
 * the connects its kernel program counted as issued and successful
 * requests. Reopened with jittered backoff until stop().
 */
import * as grpc from '@grpc/grpc-js';
import { channelCredentials, type ClientTlsMaterial } from './client-credentials.js';
import { messageType } from '../wire/protos.js';
import type { AdsNode } from './agent-ads-client.js';

const LRS_METHOD = '/envoy.service.load_stats.v3.LoadReportingService/StreamLoadStats';
const SEND_ALL = 'envoy.lrs.supports_send_all_clusters';

export interface ClusterLoad {
  readonly cluster: string;
  readonly localities: readonly {
    readonly locality: { readonly region: string; readonly zone: string; readonly subzone: string };
    readonly requests: number;
  }[];
}

export interface AgentLrsClientOptions {
  /** host:port */
  readonly server: string;
  /** TLS to the server (absent: plaintext). */
  readonly tls?: ClientTlsMaterial;
  readonly node: AdsNode;
  /** The load since the last call, for these clusters (or every cluster with load: 'all'). */
  readonly collect: (clusters: readonly string[] | 'all') => readonly ClusterLoad[];
  readonly onLost?: (why: string) => void;
}

interface RawResponse {
  clusters?: string[];
  send_all_clusters?: boolean;
  load_reporting_interval?: { seconds?: number | { toNumber(): number }; nanos?: number };
}

export class AgentLrsClient {
  private readonly client: grpc.Client;
  private readonly backoff: grpc.experimental.BackoffTimeout;
  private call: grpc.ClientDuplexStream<Buffer, Buffer> | undefined;
  private timer: NodeJS.Timeout | undefined;
  private stopping = false;
  private lastReport = 0;
  private readonly Request = messageType('envoy.service.load_stats.v3.LoadStatsRequest');
  private readonly Response = messageType('envoy.service.load_stats.v3.LoadStatsResponse');

  constructor(private readonly opts: AgentLrsClientOptions) {
    this.client = new grpc.Client(opts.server, channelCredentials(opts.tls));
    this.backoff = new grpc.experimental.BackoffTimeout(() => this.connect(), {
      initialDelay: 250,
      multiplier: 2,
      maxDelay: 5000,
      jitter: 0.2,
    });
    this.backoff.unref();
  }

  start(): void {
    this.connect();
  }

  stop(): void {
    this.stopping = true;
    clearInterval(this.timer);
    this.backoff.stop();
    this.call?.cancel();
    this.client.close();
  }

  private connect(): void {
    if (this.stopping) return;
    const c = this.client.makeBidiStreamRequest<Buffer, Buffer>(
      LRS_METHOD,
      (b) => b,
      (b) => b,
    );
    this.call = c;
    c.on('data', (b: Buffer) => {
      this.backoff.reset();
      this.onResponse(b);
    });
    const lost = (why: string): void => {
      if (this.call !== c) return;
      this.call = undefined;
      clearInterval(this.timer);
      if (this.stopping) return;
      this.backoff.runOnce();
      this.opts.onLost?.(why);
    };
    c.on('error', (err: Error) => lost(err.message));
    c.on('end', () => lost('stream ended'));
    const n = this.opts.node;
    this.write({
      node: {
        id: n.id,
        cluster: n.cluster,
        locality: { region: n.locality.region, zone: n.locality.zone, sub_zone: n.locality.subzone },
        user_agent_name: n.userAgent,
        client_features: [SEND_ALL],
      },
    });
  }

  /** The interval and the clusters to report: (re)starts the reports. */
  private onResponse(bytes: Buffer): void {
    const r = this.Response.toObject(this.Response.decode(bytes), { longs: Number }) as RawResponse;
    const secs = Number(r.load_reporting_interval?.seconds ?? 0);
    const ms = Math.max(100, secs * 1000 + (r.load_reporting_interval?.nanos ?? 0) / 1e6);
    const clusters: readonly string[] | 'all' = r.send_all_clusters ? 'all' : (r.clusters ?? []);
    clearInterval(this.timer);
    // Counts from now on: what came before the answer is not part of any interval.
    this.opts.collect(clusters);
    this.lastReport = Date.now();
    this.timer = setInterval(() => this.report(clusters), ms);
    this.timer.unref();
  }

  private report(clusters: readonly string[] | 'all'): void {
    const now = Date.now();
    const elapsed = Math.max(1, now - this.lastReport);
    this.lastReport = now;
    const load = this.opts.collect(clusters);
    this.write({
      cluster_stats: load.map((c) => ({
        cluster_name: c.cluster,
        upstream_locality_stats: c.localities.map((l) => ({
          locality: { region: l.locality.region, zone: l.locality.zone, sub_zone: l.locality.subzone },
          total_successful_requests: l.requests,
          total_issued_requests: l.requests,
          total_requests_in_progress: 0,
          total_error_requests: 0,
        })),
        total_dropped_requests: 0,
        load_report_interval: { seconds: Math.floor(elapsed / 1000), nanos: (elapsed % 1000) * 1e6 },
      })),
    });
  }

  private write(fields: object): void {
    this.call?.write(Buffer.from(this.Request.encode(this.Request.fromObject(fields)).finish()));
  }
}
