/**
 * envoy.service.load_stats.v3.LoadReportingService on the xDS port. A client
 * opens StreamLoadStats here (Envoy when its bootstrap sets
 * `cluster_manager.load_stats_config`; gRPC clients when a cluster carries
 * `lrs_server: {self: {}}`): its first request names its node, the answer
 * tells it which clusters to report and how often, and every later request
 * carries one interval's counts per upstream locality, which go to the load
 * controller.
 */
import * as grpc from '@grpc/grpc-js';
import { kindOf, type Client } from '../domain/client.js';
import { parseIncarnatedName } from '../resources/incarnations.js';
import type { LoadController } from '../sessions/load-controller.js';
import { placementOf } from '../sessions/placement.js';
import { decodeLoadStatsRequest, encodeLoadStatsResponse, type LoadStatsRequest } from '../wire/load-stats.js';

const PATH = '/envoy.service.load_stats.v3.LoadReportingService/StreamLoadStats';
/** Clients that accept "report every cluster" (grpc-js-xds reads a named list from its second entry on). */
const SEND_ALL = 'envoy.lrs.supports_send_all_clusters';

export function lrsServiceDefinition(): grpc.ServiceDefinition {
  return {
    StreamLoadStats: {
      path: PATH,
      requestStream: true,
      responseStream: true,
      requestSerialize: () => Buffer.alloc(0),
      requestDeserialize: (bytes: Buffer): LoadStatsRequest => decodeLoadStatsRequest(bytes),
      responseSerialize: (bytes: Buffer): Buffer => bytes,
      responseDeserialize: (bytes: Buffer): Buffer => bytes,
      originalName: 'streamLoadStats',
    },
  };
}

/** The name a client knows a service's cluster by (a re-created service's proxyless cluster is its incarnation's). */
export type ClusterNameFor = (service: string, client: Client) => string;

let nextReporter = 1;

/**
 * The answer a client gets: every cluster (grpc-js-xds, C-core and the node agent when they support it) or the
 * load-aware services' clusters by the names this client knows them by. Envoy gets the names even though it
 * supports send_all_clusters: it would report every cluster it holds, the static one to Canopy included.
 */
function answerFor(
  controller: LoadController,
  clusterName: ClusterNameFor,
  client: Client,
  features: readonly string[],
): { key: string; bytes: Buffer } {
  const sendAllClusters = kindOf(client) !== 'envoy' && features.includes(SEND_ALL);
  const clusters = sendAllClusters ? [] : controller.loadAwareServices().map((s) => clusterName(s, client));
  clusters.sort();
  return {
    key: sendAllClusters ? '\u0000all' : clusters.join('\u0000'),
    bytes: encodeLoadStatsResponse({ clusters, sendAllClusters, intervalMs: controller.intervalMs }),
  };
}

export function lrsHandlers(
  controller: LoadController,
  clusterName: ClusterNameFor = (service) => service,
): grpc.UntypedServiceImplementation {
  return {
    StreamLoadStats: (call: grpc.ServerDuplexStream<LoadStatsRequest, Buffer>) => {
      const reporter = `lrs-${nextReporter++}`;
      let client: Client | undefined;
      let features: readonly string[] = [];
      let answered: string | undefined;
      call.on('data', (req: LoadStatsRequest) => {
        if (!client) {
          if (!req.node) {
            call.emit('error', {
              code: grpc.status.INVALID_ARGUMENT,
              details: 'the first LoadStatsRequest must carry the node',
            });
            return;
          }
          client = placementOf(req.node);
          features = req.clientFeatures;
        }
        // Answered again when the clusters to report change (a service made load-aware, deleted or re-created).
        const answer = answerFor(controller, clusterName, client, features);
        if (answer.key !== answered) {
          answered = answer.key;
          call.write(answer.bytes);
        }
        const reports = req.clusterStats.map((c) => ({
          service: parseIncarnatedName(c.serviceName || c.clusterName).service,
          intervalSeconds: c.intervalSeconds,
          upstream: c.upstream,
          dropped: c.dropped,
        }));
        controller.record(reporter, client, reports);
      });
      const done = (): void => controller.forget(reporter);
      call.on('end', () => {
        done();
        call.end();
      });
      call.on('cancelled', done);
      call.on('error', done);
      call.on('close', done);
    },
  };
}
