/**
 * Composition root: builds the store, the CLA cache, the ADS pipeline, the
 * gRPC transport and the admin app, and wires them together. No logic here.
 */
import { pino, type Logger } from 'pino';
import { Registry } from 'prom-client';
import { buildAdminApp } from './admin/app.js';
import { configReloadMetrics, createMetrics, instrumentAdmin, instrumentStore } from './admin/metrics.js';
import type { CanopyConfig } from './domain/spec.js';
import { applyFileServices } from './config/file-source.js';
import { reloadConfigOnEdit } from './config/config-reload.js';
import { applyStartConfig, type StartApplied, type StartConfig } from './config/config-start.js';
import { MeshFeed, type MeshView } from './store/mesh-feed.js';
import { openStore, parseEtcdUrl } from './store/open-store.js';
import type { Store } from './store/store.js';
import type { ServeSecurity } from './security.js';
import ipaddr from 'ipaddr.js';
import { fullCollection } from './platform/full-collection.js';
import { startGrpcTransport } from './transport/grpc-server.js';
import { defaultXdsLimits, SubscriptionBudget } from './transport/subscription-budget.js';
import { ReadAccess } from './transport/read-access.js';
import v8 from 'node:v8';
import { serverClaCache, type ServerClaCache } from './resources/endpoint/endpoint.js';
import { canopyResources } from './resources/registry.js';
import { kernelServable } from './resources/tree-codec.js';
import { teeObserver, type XdsObserver } from './sessions/observer.js';
import { registerLoadMetrics } from './admin/load-metrics.js';
import { LoadController } from './sessions/load-controller.js';
import { PushPipeline } from './sessions/push-pipeline.js';
import { sharedEncodeCount } from './sessions/shared-responses.js';
import { KERNEL_HOSTNAMES, kernelUnsupported } from './domain/policy.js';
import { kindOf } from './domain/client.js';
import { packagePath } from './platform/paths.js';
import { readFileSync } from 'node:fs';
import { envoyRoot } from './wire/protos.js';

export interface CanopyOptions {
  readonly config: CanopyConfig;
  /** When set, the file is watched: valid edits apply, invalid ones are logged and ignored. */
  readonly configPath?: string;
  /**
   * The config file as read at start (config/config-start.ts): with it, a
   * file the data directory's store already holds is not parsed or applied
   * again, and each applied file is recorded there. `config.services` is
   * then unused.
   */
  readonly startConfig?: StartConfig;
  /** Both listeners' host, unless xdsHost/adminHost say otherwise. */
  readonly host?: string;
  readonly xdsHost?: string;
  readonly adminHost?: string;
  /**
   * Where services are kept: an open Store, or a directory for the embedded
   * database; neither keeps them in memory only (tests, the demo).
   */
  readonly store?: Store;
  /** `etcd://host:port[,…][/prefix/]`: share services with other replicas through etcd. */
  readonly storeUrl?: string;
  readonly dataDir?: string;
  /** Start on an embedded store that lost acknowledged writes (truncated or damaged log), logging what was lost. */
  readonly acceptStoreLoss?: boolean;
  /** On etcd: apply this replica's config file even though the live replicas apply another (replica-files.ts). */
  readonly takeOver?: boolean;
  /** Tokens, TLS and request limits (README, "Access control"); none by default. */
  readonly security?: Partial<ServeSecurity>;
  readonly xdsPort?: number;
  readonly adminPort?: number;
  readonly debounceMs?: number;
  /** Streams with a push in flight at once (default 256; 0: no limit). */
  readonly pushWindow?: number;
  /** LEDS for Envoy on delta ADS (default: the config's server.leds, else on). */
  readonly leds?: boolean;
  readonly logger?: Logger;
  readonly logLevel?: string;
  /** The heap growth `canopy serve` set (platform/heap-growth.ts): logged at start. */
  readonly heapGrowth?: number;
  /** How long shutdown waits for streams and requests before forcing (default 5 s). */
  readonly shutdownGraceMs?: number;
  /** Also told what the xDS layer does, after the metrics (benchmarks, embedders' tracing). */
  readonly observer?: XdsObserver;
  /** Kubernetes as a source of services (store/kube-source.ts). */
  readonly kube?: KubeOptions;
}

export interface KubeOptions {
  /** A kubeconfig file; without it, the pod's in-cluster service account. */
  readonly kubeconfig?: string;
  readonly namespaces?: readonly string[];
  readonly subzoneLabel?: string;
  readonly unreachableMs?: number;
  readonly maxBackoffMs?: number;
}

export interface Canopy {
  readonly xdsAddress: string;
  readonly adminAddress: string;
  readonly store: Store;
  /** The served services, built from the store's watch. */
  readonly mesh: MeshView;
  readonly feed: MeshFeed;
  readonly ads: PushPipeline;
  readonly claCache: ServerClaCache;
  /** How the config file met the store at start. */
  readonly started: StartApplied;
  stop(): Promise<void>;
}

export const DEFAULT_XDS_PORT = 18000;
export const DEFAULT_ADMIN_PORT = 18080;
export const DEFAULT_LOAD_REPORTING_INTERVAL_MS = 10_000;

export async function startCanopy(opts: CanopyOptions): Promise<Canopy> {
  const logger = opts.logger ?? pino({ level: opts.logLevel ?? 'info', name: 'canopy' });
  const server = opts.config.server;
  const host = opts.host ?? server.host ?? '127.0.0.1';
  const xdsHost = opts.xdsHost ?? host;
  const adminHost = opts.adminHost ?? host;
  const xdsPort = opts.xdsPort ?? server.xdsPort ?? DEFAULT_XDS_PORT;
  const adminPort = opts.adminPort ?? server.adminPort ?? DEFAULT_ADMIN_PORT;
  const debounceMs = opts.debounceMs ?? server.debounceMs ?? 100;
  const security = opts.security ?? {};
  if (!isLoopback(adminHost) && security.adminToken === undefined && !security.insecureAdmin) {
    throw new Error(
      `refusing to serve the admin API on ${adminHost} without a token: anyone who can reach it could rewrite the mesh. ` +
        'Give --admin-token-file FILE (or CANOPY_ADMIN_TOKEN), bind it to loopback with --admin-host 127.0.0.1, ' +
        'or accept the risk with --insecure-admin',
    );
  }

  // Replicas on etcd apply one file: checked before anything else is opened (store/etcd/replica-files.ts).
  const replicaFiles =
    opts.storeUrl !== undefined && opts.configPath !== undefined && opts.startConfig
      ? await openReplicaFiles(opts.storeUrl, opts.configPath, opts.startConfig.digest, opts.takeOver ?? false)
      : undefined;
  const registry = new Registry();
  const opening =
    opts.store ??
    openStore({
      ...(opts.storeUrl !== undefined ? { url: opts.storeUrl } : {}),
      ...(opts.dataDir !== undefined ? { dataDir: opts.dataDir } : {}),
      ...(opts.acceptStoreLoss ? { acceptStoreLoss: true } : {}),
      onStoreLoss: (report) => logger.error({ dataDir: opts.dataDir }, `accepted a store loss: ${report}`),
    });
  // While the database opens on the thread pool: the protobuf descriptors the transport needs (~90 ms of CPU).
  envoyRoot();
  const opened = await opening;
  const store = instrumentStore(opened, registry);
  const feed = await MeshFeed.open(store);
  const mesh = feed.mesh;
  const claCache = serverClaCache();
  const resources = canopyResources(mesh, claCache, server.lazyXds, { leds: opts.leds ?? server.leds ?? true });
  const limits = { ...defaultXdsLimits(v8.getHeapStatistics().heap_size_limit), ...security.xdsLimits };
  const budget = new SubscriptionBudget(limits, (typeUrl) => resources.get(typeUrl) !== undefined);
  const metrics = createMetrics(registry, {
    claCache: () => claCache.stats(),
    treeNodes: () => mesh.list().reduce((n, s) => n + s.tree.nodeCount, 0),
    // Read at scrape time, after the pipeline below exists.
    connectedClients: () => pipeline.connected,
    subscriptions: () => ({ bytes: budget.used, budget: limits.subscriptionBudgetBytes }),
    clientsByKind: () =>
      pipeline.clients(0).map((c) => ({ kind: kindOf(c.placement), protocol: c.protocol ?? 'sotw' })),
    storeUp: () => feed.connected,
    version: packageVersion(),
    sharedEncodes: sharedEncodeCount,
  });
  const reloads = configReloadMetrics(registry);
  const observer = opts.observer ? teeObserver(metrics, opts.observer) : metrics;
  const pushWindow = opts.pushWindow ?? server.pushWindow;
  const pipeline = new PushPipeline({
    resources,
    observer,
    log: logger.child({ component: 'xds' }),
    debounceMs,
    ...(pushWindow !== undefined ? { pushWindow } : {}),
    collect: fullCollection(),
  });

  // Load-aware locality: client load reports (LRS) → weights per client node, recomputed every interval.
  // Replicas on etcd share per-replica aggregates and plan from their sum.
  const loadIntervalMs = server.loadReportingIntervalMs ?? DEFAULT_LOAD_REPORTING_INTERVAL_MS;
  const loadShare = opts.storeUrl !== undefined ? await openLoadShare(opts.storeUrl, loadIntervalMs) : undefined;
  let shareFailing = false;
  const load = new LoadController({
    mesh,
    intervalMs: loadIntervalMs,
    notify: (services) => pipeline.notify(services),
    ...(loadShare
      ? {
          share: loadShare,
          // Logged once per outage, not once per interval.
          onPublished: (err: unknown) => {
            if (err !== undefined && !shareFailing)
              logger.warn({ err }, "could not publish this replica's load to etcd");
            if (err === undefined && shareFailing) logger.info({}, "this replica's load is published to etcd again");
            shareFailing = err !== undefined;
          },
        }
      : {}),
  });
  if (loadShare) logger.info({ replica: loadShare.replica }, 'load reports shared with the other replicas');
  load.start();
  registerLoadMetrics(registry, load);

  const kernelGaps = new Map<string, string>();
  feed.subscribe((changes) => {
    for (const c of changes) {
      if (c.kind === 'deleted') resources.forget(c.service);
      logger.info({ service: c.service, kind: c.kind, endpoints: c.endpoints.length }, 'service changed');
      warnKernelGaps(c.service);
    }
    pipeline.notify(changes.map((c) => c.service));
  });
  /** Once per change of the list: the policy features node agents cannot apply (also in the tree's unsupported_policy). */
  function warnKernelGaps(name: string): void {
    const spec = mesh.get(name)?.spec;
    const gaps =
      spec && kernelServable(spec)
        ? kernelUnsupported(spec.loadBalancing.policy, { nodes: [], endpoints: spec.endpoints }).join(', ')
        : '';
    if (gaps === (kernelGaps.get(name) ?? '')) return;
    kernelGaps.set(name, gaps);
    if (gaps)
      logger.warn(
        { service: name, unsupportedPolicy: gaps },
        gaps.includes(KERNEL_HOSTNAMES)
          ? 'the kernel tree cannot carry hostname endpoints: node agents refuse the service (NACK naming it)'
          : 'the kernel tree cannot express these policy features: node agents serve the plain tree',
      );
  }
  // A store handed in or etcd (shared with replicas) keeps no record of the file: only a data directory does.
  const recordDir = opts.store === undefined && opts.storeUrl === undefined ? opts.dataDir : undefined;
  const initial: StartApplied = opts.startConfig
    ? await applyStartConfig(store, opts.startConfig, recordDir)
    : { ...(await applyFileServices(store, opts.config.services)), unchangedFile: false, keptApiChanges: [] };
  reloads.loaded('success');
  if (replicaFiles && initial.digest !== undefined) await replicaFiles.applied(initial.digest);
  logger.info({ store: store.description, revision: feed.revision, ...summary(initial) }, 'store opened');
  if (initial.unchangedFile)
    logger.info(
      {
        file: opts.configPath,
        services: initial.unchanged,
        keptApiChanges: initial.keptApiChanges.length,
        // Not even read: its status was the one recorded (config-start.ts).
        read: opts.startConfig?.unread !== true,
      },
      'config file unchanged since the store applied it: not parsed again',
    );

  const kube = opts.kube ? await startKubeSource(opts.kube, store, logger, registry) : undefined;

  logger.info({ xdsLimits: limits }, 'xds limits');
  if (opts.heapGrowth !== undefined) logger.info({ heapGrowthPercent: opts.heapGrowth }, 'js heap growth');
  const grpcTransport = await startGrpcTransport({
    ads: pipeline,
    budget,
    refused: (limit) => observer.requestRefused?.(limit),
    resources,
    access: new ReadAccess(security.xdsReadRules),
    csds: {
      ...(security.adminToken !== undefined ? { adminToken: security.adminToken } : {}),
      openReads: security.adminOpenReads ?? false,
    },
    host: xdsHost,
    port: xdsPort,
    load,
    loadClusterName: (service, client) => resources.clusterNameFor(service, client),
    ...(security.tls ? { tls: security.tls } : {}),
  });
  let ready = false;
  const admin = buildAdminApp({
    store,
    mesh,
    caughtUp: (revision) => feed.caughtUp(revision),
    claCache,
    clients: () => pipeline.clients(),
    load: (service) => load.report(service),
    registry,
    logger: logger.child({ component: 'admin' }),
    // Not ready while the store is unreachable: the last state keeps being served, but writes would fail.
    ready: () => ready && feed.connected,
    ...(kube ? { notReady: () => (ready ? kube.notReady() : undefined) } : {}),
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
  instrumentAdmin(admin, registry);
  await admin.listen({ host: adminHost, port: adminPort });
  const adminBound = admin.server.address();
  const adminPortBound = typeof adminBound === 'object' && adminBound ? adminBound.port : adminPort;

  const stopWatching = opts.configPath
    ? reloadConfigOnEdit({
        file: opts.configPath,
        store,
        logger,
        ...(recordDir !== undefined ? { recordDir } : {}),
        // The start read the file already: the watcher is not to read it again (a 100k-endpoint file is 9 MB).
        ...(initial.digest !== undefined ? { initialDigest: initial.digest } : {}),
        loaded: (outcome) => reloads.loaded(outcome),
        ...(replicaFiles
          ? { refuse: (digest) => replicaFiles.refuseEdit(digest), applied: (digest) => replicaFiles.applied(digest) }
          : {}),
      })
    : () => {};

  ready = true;
  const xdsAddress = `${hostForUrl(xdsHost)}:${grpcTransport.port}`;
  const adminAddress = `${hostForUrl(adminHost)}:${adminPortBound}`;
  logger.info({ xds: xdsAddress, admin: adminAddress, services: mesh.size }, 'canopy ready');

  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> =>
    (stopping ??= (async () => {
      ready = false;
      stopWatching();
      kube?.stop();
      await kube?.settled();
      load.stop();
      await loadShare?.close();
      await replicaFiles?.close();
      const grace = opts.shutdownGraceMs ?? 5000;
      logger.info({ graceMs: grace }, 'shutting down: closing xDS streams and the admin API');
      await Promise.all([grpcTransport.stop(grace), admin.close()]);
      feed.close();
      // A store handed in belongs to the caller.
      if (!opts.store) await opened.close();
      logger.info({}, 'canopy stopped');
    })());

  return { xdsAddress, adminAddress, store, mesh, feed, ads: pipeline, claCache, started: initial, stop };
}

/** Loaded only when asked for: client-node is a large module tree. */
async function startKubeSource(kube: KubeOptions, store: Store, logger: Logger, registry: Registry) {
  const [{ KubeConfig }, { KubeSource }, { registerKubeMetrics }] = await Promise.all([
    import('@kubernetes/client-node'),
    import('./store/kube-source.js'),
    import('./admin/kube-metrics.js'),
  ]);
  const config = new KubeConfig();
  if (kube.kubeconfig !== undefined) config.loadFromFile(kube.kubeconfig);
  else config.loadFromCluster();
  const source = new KubeSource({
    store,
    config,
    log: logger.child({ component: 'kube' }),
    ...(kube.namespaces?.length ? { namespaces: kube.namespaces } : {}),
    ...(kube.subzoneLabel !== undefined ? { subzoneLabel: kube.subzoneLabel } : {}),
    ...(kube.unreachableMs !== undefined ? { unreachableMs: kube.unreachableMs } : {}),
    ...(kube.maxBackoffMs !== undefined ? { maxBackoffMs: kube.maxBackoffMs } : {}),
  });
  registerKubeMetrics(registry, () => source.stats());
  source.start();
  logger.info(
    { server: config.getCurrentCluster()?.server, namespaces: kube.namespaces ?? 'all' },
    'kubernetes: watching Services, EndpointSlices and Nodes',
  );
  return source;
}

async function openReplicaFiles(url: string, file: string, digest: string, takeOver: boolean) {
  const { endpoints, prefix } = parseEtcdUrl(url);
  const { ReplicaFiles } = await import('./store/etcd/replica-files.js');
  return ReplicaFiles.open({ endpoints, prefix, file, digest, takeOver });
}

async function openLoadShare(url: string, intervalMs: number) {
  const { endpoints, prefix } = parseEtcdUrl(url);
  const { EtcdLoadShare } = await import('./store/etcd/load-share.js');
  return EtcdLoadShare.open({ endpoints, prefix, intervalMs });
}

function isLoopback(host: string): boolean {
  if (host === 'localhost') return true;
  return ipaddr.isValid(host) && ipaddr.process(host).range() === 'loopback';
}

function summary(r: { replaced: readonly string[]; deleted: readonly string[]; unchanged: number }) {
  return { replaced: r.replaced.length, deleted: r.deleted.length, unchanged: r.unchanged };
}

function hostForUrl(host: string): string {
  return host.includes(':') ? `[${host}]` : host;
}

function packageVersion(): string {
  try {
    return (JSON.parse(readFileSync(packagePath('package.json'), 'utf8')) as { version: string }).version;
  } catch {
    return 'unknown';
  }
}
