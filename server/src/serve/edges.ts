/**
 * The server's two edges, each built from the listeners' security settings
 * (security.ts): the gRPC transport (ADS, CSDS, LRS) and the admin API.
 */
import type { ClusterStatus } from '../kube/kube-clusters.js';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { buildAdminApp } from '../admin/app.js';
import { instrumentAdmin } from '../admin/metrics.js';
import type { ServeSecurity } from '../security.js';
import type { LoadController } from '../sessions/load-controller.js';
import type { MeshFeed } from '../store/mesh-feed.js';
import type { Store } from '../store/store.js';
import { startGrpcTransport, type GrpcTransport, type TransportOptions } from '../transport/grpc-server.js';
import { startWorkerTransport } from '../transport/xds-workers.js';
import { ReadAccess } from '../transport/read-access.js';
import type { Listeners } from './listen.js';
import type { Xds } from './xds.js';

/**
 * The xDS port's threads by default: the main thread alone. Workers (`--xds-workers N`) took the main
 * thread's CPU down about 2.5× at 2,000 streams but the process's up 1.2–1.3× and its RSS per stream 1.5×,
 * with no clear gain in time on the shared 2-core machine measured (docs/benchmarks.md, "1 core and 2");
 * `os.availableParallelism()` becomes the default once a quiet run shows one.
 */
export const DEFAULT_XDS_WORKERS = 1;

export function startTransport(
  xds: Xds,
  load: LoadController,
  at: Listeners,
  security: Partial<ServeSecurity>,
  workers = DEFAULT_XDS_WORKERS,
): Promise<GrpcTransport> {
  const opts: TransportOptions = {
    ads: xds.pipeline,
    budget: xds.budget,
    refused: (limit) => xds.observer.requestRefused?.(limit),
    resources: xds.resources,
    access: new ReadAccess(security.xdsReadRules),
    csds: {
      ...(security.adminToken !== undefined ? { adminToken: security.adminToken } : {}),
      openReads: security.adminOpenReads ?? false,
    },
    host: at.xdsHost,
    port: at.xdsPort,
    load,
    loadClusterName: (service, client) => xds.resources.clusterNameFor(service, client),
    ...(security.tls ? { tls: security.tls } : {}),
  };
  return workers > 1 ? startWorkerTransport(opts, workers) : startGrpcTransport(opts);
}

export interface AdminParts {
  readonly store: Store;
  readonly feed: MeshFeed;
  readonly xds: Xds;
  readonly load: LoadController;
  readonly registry: Registry;
  readonly logger: Logger;
  /** Ready to serve (the store's reachability is added here). */
  readonly ready: () => boolean;
  /** Why the server is not ready although it serves (a Kubernetes source out of reach), if it has such a reason. */
  readonly notReady?: () => string | undefined;
  /** Several Kubernetes clusters: each one's state (GET /api/v1/clusters). */
  readonly clusters?: () => readonly ClusterStatus[];
}

/** The admin API, listening; resolves with the port it bound. */
export async function startAdmin(
  parts: AdminParts,
  at: Listeners,
  security: Partial<ServeSecurity>,
): Promise<{ app: FastifyInstance; port: number }> {
  const { feed, xds } = parts;
  const admin = buildAdminApp({
    store: parts.store,
    mesh: feed.mesh,
    skips: feed.skips,
    caughtUp: (revision) => feed.caughtUp(revision),
    claCache: xds.claCache,
    clients: () => xds.pipeline.clients(),
    load: (service) => parts.load.report(service),
    registry: parts.registry,
    logger: parts.logger.child({ component: 'admin' }),
    // Not ready while the store is unreachable: the last state keeps being served, but writes would fail.
    ready: () => parts.ready() && feed.connected,
    ...(parts.notReady ? { notReady: parts.notReady } : {}),
    ...(parts.clusters ? { clusters: parts.clusters } : {}),
    access: {
      ...(security.adminToken !== undefined ? { token: security.adminToken } : {}),
      ...(security.adminTokenFile !== undefined ? { tokenFile: security.adminTokenFile } : {}),
      openReads: security.adminOpenReads ?? false,
      hostnames: security.adminHostnames ?? [],
    },
    ...(security.tls ? { https: { cert: security.tls.cert, key: security.tls.key } } : {}),
    ...(security.adminBodyLimit !== undefined ? { bodyLimit: security.adminBodyLimit } : {}),
    ...(security.adminWriteLimit !== undefined
      ? { writeRateLimit: { max: security.adminWriteLimit, windowMs: 10_000 } }
      : {}),
  });
  instrumentAdmin(admin, parts.registry);
  await admin.listen({ host: at.adminHost, port: at.adminPort });
  const bound = admin.server.address();
  return { app: admin, port: typeof bound === 'object' && bound ? bound.port : at.adminPort };
}
