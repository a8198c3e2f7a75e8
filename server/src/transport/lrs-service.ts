/**
 * envoy.service.load_stats.v3.LoadReportingService on the xDS port. A client
 * whose cluster carries `lrs_server: {self: {}}` opens StreamLoadStats here:
 * its first request names its node, the answer tells it which clusters to
 * report and how often, and every later request carries one interval's
 * counts per upstream locality, which go to the load controller.
 */
import * as grpc from '@grpc/grpc-js';
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

let nextReporter = 1;

export function lrsHandlers(controller: LoadController): grpc.UntypedServiceImplementation {
  return {
    StreamLoadStats: (call: grpc.ServerDuplexStream<LoadStatsRequest, Buffer>) => {
      const reporter = `lrs-${nextReporter++}`;
      let client: ReturnType<typeof placementOf> | undefined;
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
          const clusters = controller.loadAwareServices();
          call.write(
            encodeLoadStatsResponse({
              clusters,
              sendAllClusters: req.clientFeatures.includes(SEND_ALL),
              intervalMs: controller.intervalMs,
            }),
          );
        }
        const reports = req.clusterStats.map((c) => ({
          service: parseIncarnatedName(c.serviceName || c.clusterName).service,
          intervalSeconds: c.intervalSeconds,
          upstream: c.upstream,
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
