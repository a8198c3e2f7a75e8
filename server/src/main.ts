/**
 * Composition root: builds the store, the CLA cache, the ADS pipeline, the
 * gRPC transport and the admin app, and wires them together. No logic here.
 */
import { pino, type Logger } from 'pino';
import { Registry } from 'prom-client';
import { buildAdminApp } from './admin/app.js';
import { createMetrics } from './admin/metrics.js';
import { formatFieldErrors } from './domain/errors.js';
import type { CanopyConfig } from './domain/spec.js';
import { watchConfigFile } from './store/config-file.js';
import { ServiceStore } from './store/service-store.js';
import { startGrpcTransport } from './transport/grpc-server.js';
import { serverClaCache, type ServerClaCache } from './resources/endpoint.js';
import { canopyResources } from './resources/registry.js';
import { teeObserver, type XdsObserver } from './sessions/observer.js';
import { PushPipeline } from './sessions/push-pipeline.js';

export interface CanopyOptions {
  readonly config: CanopyConfig;
  /** When set, the file is watched: valid edits apply, invalid ones are logged and ignored. */
  readonly configPath?: string;
  readonly host?: string;
  readonly xdsPort?: number;
  readonly adminPort?: number;
  readonly debounceMs?: number;
  /** Streams with a push in flight at once (default 256; 0: no limit). */
  readonly pushWindow?: number;
  readonly logger?: Logger;
  readonly logLevel?: string;
  /** How long shutdown waits for streams and requests before forcing (default 5 s). */
  readonly shutdownGraceMs?: number;
  /** Also told what the xDS layer does, after the metrics (benchmarks, embedders' tracing). */
  readonly observer?: XdsObserver;
}

export interface Canopy {
  readonly xdsAddress: string;
  readonly adminAddress: string;
  readonly store: ServiceStore;
  readonly ads: PushPipeline;
  readonly claCache: ServerClaCache;
  stop(): Promise<void>;
}

export const DEFAULT_XDS_PORT = 18000;
export const DEFAULT_ADMIN_PORT = 18080;

export async function startCanopy(opts: CanopyOptions): Promise<Canopy> {
  const logger = opts.logger ?? pino({ level: opts.logLevel ?? 'info', name: 'canopy' });
  const server = opts.config.server;
  const host = opts.host ?? server.host ?? '127.0.0.1';
  const xdsPort = opts.xdsPort ?? server.xdsPort ?? DEFAULT_XDS_PORT;
  const adminPort = opts.adminPort ?? server.adminPort ?? DEFAULT_ADMIN_PORT;
  const debounceMs = opts.debounceMs ?? server.debounceMs ?? 100;

  const store = new ServiceStore();
  const claCache = serverClaCache();
  const resources = canopyResources(store.mesh, claCache);
  const registry = new Registry();
  const metrics = createMetrics(registry, {
    claCache: () => claCache.stats(),
    treeNodes: () => store.mesh.list().reduce((n, s) => n + s.tree.nodeCount, 0),
    // Read at scrape time, after the pipeline below exists.
    connectedClients: () => pipeline.connected,
  });
  const observer = opts.observer ? teeObserver(metrics, opts.observer) : metrics;
  const pushWindow = opts.pushWindow ?? server.pushWindow;
  const pipeline = new PushPipeline({
    resources,
    observer,
    log: logger.child({ component: 'xds' }),
    debounceMs,
    ...(pushWindow !== undefined ? { pushWindow } : {}),
  });

  store.subscribe((changes) => {
    for (const c of changes) {
      if (c.kind === 'deleted') resources.forget(c.service);
      logger.info({ service: c.service, kind: c.kind, endpoints: c.endpoints.length }, 'service changed');
    }
    pipeline.notify(changes.map((c) => c.service));
  });
  store.replaceAll(opts.config.services);

  const grpcTransport = await startGrpcTransport({ ads: pipeline, host, port: xdsPort });
  let ready = false;
  const admin = buildAdminApp({
    store,
    claCache,
    clients: () => pipeline.clients(),
    registry,
    logger: logger.child({ component: 'admin' }),
    ready: () => ready,
  });
  await admin.listen({ host, port: adminPort });
  const adminBound = admin.server.address();
  const adminPortBound = typeof adminBound === 'object' && adminBound ? adminBound.port : adminPort;

  const stopWatching = opts.configPath
    ? watchConfigFile(opts.configPath, {
        onValid: (config) => {
          const changes = store.replaceAll(config.services);
          logger.info({ file: opts.configPath, changes: changes.length }, 'config reloaded');
        },
        onWatchError: (err) =>
          logger.error({ file: opts.configPath, err }, 'config watch failed: edits to the file are no longer applied'),
        onInvalid: (errors) =>
          logger.error(
            { file: opts.configPath, errors },
            `config edit rejected, running config kept: ${formatFieldErrors(errors)}`,
          ),
      })
    : () => {};

  ready = true;
  const xdsAddress = `${hostForUrl(host)}:${grpcTransport.port}`;
  const adminAddress = `${hostForUrl(host)}:${adminPortBound}`;
  logger.info({ xds: xdsAddress, admin: adminAddress, services: store.mesh.size }, 'canopy ready');

  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> =>
    (stopping ??= (async () => {
      ready = false;
      stopWatching();
      const grace = opts.shutdownGraceMs ?? 5000;
      logger.info({ graceMs: grace }, 'shutting down: closing xDS streams and the admin API');
      await Promise.all([grpcTransport.stop(grace), admin.close()]);
      logger.info({}, 'canopy stopped');
    })());

  return { xdsAddress, adminAddress, store, ads: pipeline, claCache, stop };
}

function hostForUrl(host: string): string {
  return host.includes(':') ? `[${host}]` : host;
}
