/**
 * A raw LoadReportingService client for protocol tests: @grpc/grpc-js with
 * Envoy's lrs.proto loaded by @grpc/proto-loader (nothing shared with the
 * server's codec), one StreamLoadStats with a queue of the answers.
 */
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { createRequire } from 'node:module';
import path from 'node:path';

const xdsDir = path.dirname(createRequire(import.meta.url).resolve('@grpc/grpc-js-xds/package.json'));
const includeDirs = ['envoy-api', 'xds', 'googleapis', 'protoc-gen-validate'].map((d) => path.join(xdsDir, 'deps', d));

export interface LoadStatsAnswer {
  clusters: string[];
  send_all_clusters: boolean;
  load_reporting_interval: { seconds: string; nanos: number } | null;
}

export interface LocalityLoad {
  readonly locality: { region: string; zone: string; sub_zone: string };
  readonly issued: number;
}

let ctor: grpc.ServiceClientConstructor | undefined;

function lrsCtor(): grpc.ServiceClientConstructor {
  if (ctor) return ctor;
  const def = protoLoader.loadSync('envoy/service/load_stats/v3/lrs.proto', {
    includeDirs,
    keepCase: true,
    longs: String,
    enums: String,
    defaults: true,
    oneofs: true,
  });
  const pkg = grpc.loadPackageDefinition(def) as unknown as {
    envoy: { service: { load_stats: { v3: { LoadReportingService: grpc.ServiceClientConstructor } } } };
  };
  ctor = pkg.envoy.service.load_stats.v3.LoadReportingService;
  return ctor;
}

export class RawLrsStream {
  private readonly client: grpc.Client;
  private readonly call: grpc.ClientDuplexStream<object, LoadStatsAnswer>;
  private readonly queue: LoadStatsAnswer[] = [];
  private waiters: ((a: LoadStatsAnswer) => void)[] = [];

  /** Opens the stream and sends the first request with this node. */
  constructor(address: string, node: object) {
    const Ctor = lrsCtor();
    this.client = new Ctor(address, grpc.credentials.createInsecure());
    const method = (this.client as unknown as Record<string, () => grpc.ClientDuplexStream<object, LoadStatsAnswer>>)[
      'StreamLoadStats'
    ];
    this.call = method!.call(this.client);
    this.call.on('error', () => {});
    this.call.on('data', (a: LoadStatsAnswer) => {
      const w = this.waiters.shift();
      if (w) w(a);
      else this.queue.push(a);
    });
    this.call.write({ node });
  }

  /** One interval's report: per cluster, the requests issued to each locality over `seconds`. */
  report(clusters: Record<string, readonly LocalityLoad[]>, seconds = 1): void {
    this.call.write({
      cluster_stats: Object.entries(clusters).map(([name, localities]) => ({
        cluster_name: name,
        upstream_locality_stats: localities.map((l) => ({
          locality: l.locality,
          total_issued_requests: l.issued,
          total_successful_requests: l.issued,
        })),
        load_report_interval: { seconds },
      })),
    });
  }

  next(timeoutMs = 3000): Promise<LoadStatsAnswer> {
    const queued = this.queue.shift();
    if (queued) return Promise.resolve(queued);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== waiter);
        reject(new Error(`no LoadStatsResponse within ${timeoutMs} ms`));
      }, timeoutMs);
      const waiter = (a: LoadStatsAnswer): void => {
        clearTimeout(timer);
        resolve(a);
      };
      this.waiters.push(waiter);
    });
  }

  /** Resolves with an answer if one arrives within `ms`, else undefined. */
  async maybeNext(ms: number): Promise<LoadStatsAnswer | undefined> {
    return this.next(ms).catch(() => undefined);
  }

  close(): void {
    this.call.end();
    this.client.close();
  }
}
