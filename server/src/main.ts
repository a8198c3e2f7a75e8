/**
 * Composition root: opens the store and the mesh built from its watch, builds
 * the xDS side (serve/xds.ts), load-aware locality (serve/load.ts), the gRPC
 * transport and the admin API (serve/edges.ts), and the config file's owner
 * (config/config-source.ts), and wires them together. A walk through the two
 * flows it wires (a health flip, a config load): docs/architecture.md.
 */
import { pino, type Logger } from 'pino';
import { Registry } from 'prom-client';
import { configReloadMetrics, instrumentStore } from './admin/metrics.js';
import { applySummary, ConfigSource } from './config/config-source.js';
import { envoyRoot } from './wire/protos.js';
import { MeshFeed } from './store/mesh-feed.js';
import { openStore } from './store/open-store.js';
import { startAdmin, startTransport } from './serve/edges.js';
import { hostForUrl, listeners, webViewUrl } from './serve/listen.js';
import { startLoad } from './serve/load.js';
import { logMeshChanges } from './serve/mesh-log.js';
import { startReadiness } from './serve/readiness.js';
import { inputSkips, openReplicaFiles, startKubeSource } from './serve/sources.js';
import type { Canopy, CanopyOptions } from './serve/options.js';
import { buildXds } from './serve/xds.js';

export type { Canopy, CanopyOptions, KubeOptions } from './serve/options.js';
export { DEFAULT_ADMIN_PORT, DEFAULT_XDS_PORT } from './serve/listen.js';
export { DEFAULT_LOAD_REPORTING_INTERVAL_MS } from './serve/load.js';

/** The store the options name: etcd, a data directory (LevelDB) or memory. */
function openStoreFor(opts: CanopyOptions, logger: Logger) {
  return openStore({
    ...(opts.storeUrl !== undefined ? { url: opts.storeUrl } : {}),
    ...(opts.dataDir !== undefined ? { dataDir: opts.dataDir } : {}),
    ...(opts.acceptStoreLoss ? { acceptStoreLoss: true } : {}),
    onStoreLoss: (report) => logger.error({ dataDir: opts.dataDir }, `accepted a store loss: ${report}`),
  });
}

export async function startCanopy(opts: CanopyOptions): Promise<Canopy> {
  const logger = opts.logger ?? pino({ level: opts.logLevel ?? 'info', name: 'canopy' });
  const at = listeners(opts);
  const security = opts.security ?? {};
  // Replicas on etcd apply one file: checked before anything else is opened (store/etcd/replica-files.ts).
  const replicas =
    opts.storeUrl !== undefined && opts.configPath !== undefined && opts.startConfig
      ? await openReplicaFiles(opts.storeUrl, opts.configPath, opts.startConfig.digest, opts.takeOver ?? false)
      : undefined;
  const registry = new Registry();
  const opening = opts.store ?? openStoreFor(opts, logger);
  // While the database opens on the thread pool: the protobuf descriptors the transport needs (~90 ms of CPU).
  envoyRoot();
  const opened = await opening;
  const store = instrumentStore(opened, registry);
  const skips = inputSkips(logger, registry);
  const feed = await MeshFeed.open(store, { skips });
  const xds = buildXds(opts, feed, registry, logger);
  const reloads = configReloadMetrics(registry);
  const load = await startLoad(opts, feed.mesh, xds.pipeline, registry, logger, store);

  // A health flip or any other change: logged, then pushed to the streams it touches (after the debounce).
  const stopLogging = logMeshChanges(feed, logger);
  const stopFollowing = xds.pipeline.follow(feed);

  // A store handed in or etcd (shared with replicas) keeps no record of the file: only a data directory does.
  const recordDir = opts.store === undefined && opts.storeUrl === undefined ? opts.dataDir : undefined;
  const config = new ConfigSource({
    store,
    logger,
    config: opts.config,
    ...(opts.configPath !== undefined ? { file: opts.configPath } : {}),
    ...(opts.startConfig !== undefined ? { startConfig: opts.startConfig } : {}),
    ...(recordDir !== undefined ? { recordDir } : {}),
    loads: reloads,
    ...(replicas ? { replicas } : {}),
  });
  const initial = await config.start();
  logger.info({ store: store.description, revision: feed.revision, ...applySummary(initial) }, 'store opened');
  config.logUnchanged();
  const kube = opts.kube ? await startKubeSource(opts.kube, store, logger, registry, skips) : undefined;

  logger.info({ xdsLimits: xds.limits }, 'xds limits');
  if (opts.heapGrowth !== undefined) logger.info({ heapGrowthPercent: opts.heapGrowth }, 'js heap growth');
  const grpcTransport = await startTransport(xds, load.controller, at, security, opts.xdsWorkers);
  let ready = false;
  const parts = {
    ...{ store, feed, xds, load: load.controller, registry, logger, ready: () => ready },
    ...(kube ? { notReady: () => (ready ? kube.notReady() : undefined) } : {}),
    ...(kube?.clusters ? { clusters: kube.clusters } : {}),
  };
  const admin = await startAdmin(parts, at, security);
  const stopWatching = config.watch();

  ready = true;
  const xdsAddress = `${hostForUrl(at.xdsHost)}:${grpcTransport.port}`;
  const adminAddress = `${hostForUrl(at.adminHost)}:${admin.port}`;
  const webView = webViewUrl(at.adminHost, admin.port, security.tls !== undefined);
  const address = { xds: xdsAddress, admin: adminAddress, webView };
  const readiness = startReadiness({ started: () => ready, feed, kube, logger, address });

  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> =>
    (stopping ??= (async () => {
      ready = false;
      stopWatching();
      kube?.stop();
      await kube?.settled();
      await load.stop();
      await replicas?.close();
      const grace = opts.shutdownGraceMs ?? 5000;
      logger.info({ graceMs: grace }, 'shutting down: closing xDS streams and the admin API');
      await Promise.all([grpcTransport.stop(grace), admin.app.close()]);
      stopFollowing();
      stopLogging();
      feed.close();
      // A store handed in belongs to the caller.
      if (!opts.store) await opened.close();
      logger.info({}, 'canopy stopped');
    })());

  const { claCache, pipeline } = xds;
  const served = { store, mesh: feed.mesh, feed, ads: pipeline, claCache, started: initial, configSource: config };
  const xdsThreads = (): readonly number[] => grpcTransport.threads?.() ?? [];
  return { xdsAddress, adminAddress, webView, ...served, ...readiness, xdsThreads, stop };
}
