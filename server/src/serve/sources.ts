/**
 * Sources of services beside the config file, each loaded only when asked for: Kubernetes
 * (kube/kube-source.ts) and, on etcd, the replicas' agreement on one config file
 * (store/etcd/replica-files.ts).
 */
import { unwatchFile, watchFile } from 'node:fs';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { parseEtcdUrl } from '../store/open-store.js';
import { registerSkipMetrics } from '../admin/skipped.js';
import { InputSkips, logSkips } from '../store/input-skips.js';
import type { Store } from '../store/store.js';
import type { ClusterStatus } from '../kube/kube-clusters.js';
import type { KubeOptions } from './options.js';

/** What main.ts holds of the Kubernetes source, one cluster or several. */
export interface RunningKube {
  notReady(): string | undefined;
  stop(): void;
  settled(): Promise<void>;
  /** Several clusters: each one's state (GET /api/v1/clusters). */
  clusters?: () => readonly ClusterStatus[];
}

/** What the admin API's rules refuse, from any source: logged once each and counted (store/input-skips.ts). */
export function inputSkips(logger: Logger, registry: Registry): InputSkips {
  const skips = new InputSkips();
  logSkips(skips, logger);
  registerSkipMetrics(registry, skips);
  return skips;
}

/** What one cluster's source and several clusters' sources are both given. */
function sourceOptions(kube: KubeOptions, skips: InputSkips | undefined) {
  return {
    ...(skips ? { skips } : {}),
    ...(kube.namespaces?.length ? { namespaces: kube.namespaces } : {}),
    ...(kube.subzoneLabel !== undefined ? { subzoneLabel: kube.subzoneLabel } : {}),
    ...(kube.unreachableMs !== undefined ? { unreachableMs: kube.unreachableMs } : {}),
    ...(kube.maxBackoffMs !== undefined ? { maxBackoffMs: kube.maxBackoffMs } : {}),
    ...(kube.crdCheckMs !== undefined ? { crdCheckMs: kube.crdCheckMs } : {}),
  };
}

/** Loaded only when asked for: client-node is a large module tree. */
export async function startKubeSource(
  kube: KubeOptions,
  store: Store,
  logger: Logger,
  registry: Registry,
  skips?: InputSkips,
): Promise<RunningKube> {
  if (kube.clusters !== undefined || kube.clustersFile !== undefined)
    return startKubeClusters(kube, store, logger, registry, skips);
  const [{ KubeConfig }, { KubeSource }, { registerKubeMetrics }] = await Promise.all([
    import('@kubernetes/client-node'),
    import('../kube/kube-source.js'),
    import('../kube/kube-metrics.js'),
  ]);
  const config = new KubeConfig();
  if (kube.kubeconfig !== undefined) config.loadFromFile(kube.kubeconfig);
  else config.loadFromCluster();
  const source = new KubeSource({
    store,
    config,
    log: logger.child({ component: 'kube' }),
    ...sourceOptions(kube, skips),
  });
  registerKubeMetrics(registry, () => source.stats());
  source.start();
  logger.info(
    { server: config.getCurrentCluster()?.server, namespaces: kube.namespaces ?? 'all' },
    'kubernetes: watching Services, EndpointSlices and Nodes',
  );
  return source;
}

/** Several clusters: one source each, their union written once; a clusters file is followed as it changes. */
async function startKubeClusters(
  kube: KubeOptions,
  store: Store,
  logger: Logger,
  registry: Registry,
  skips: InputSkips | undefined,
) {
  const [{ KubeClusters }, { readClusterList }, { registerKubeMetrics, registerClusterMetrics }] = await Promise.all([
    import('../kube/kube-clusters.js'),
    import('../kube/kube-cluster-list.js'),
    import('../kube/kube-metrics.js'),
  ]);
  const file = kube.clustersFile;
  const clusters = file !== undefined ? await readClusterList(file) : (kube.clusters ?? []);
  const log = logger.child({ component: 'kube' });
  const source = new KubeClusters({
    store,
    clusters,
    log,
    ...sourceOptions(kube, skips),
  });
  registerKubeMetrics(registry, () => source.stats());
  registerClusterMetrics(registry, () => source.clusters());
  source.start();
  let unwatch = () => {};
  if (file !== undefined) {
    // Polling: an editor's rename-over and a ConfigMap's symlink swap both show as a new mtime.
    const reread = () =>
      void readClusterList(file).then(
        (next) => source.update(next),
        (err: unknown) => log.error({ err }, 'kubernetes: clusters file not applied: the running list stays'),
      );
    watchFile(file, { interval: 200 }, reread);
    unwatch = () => unwatchFile(file, reread);
  }
  return {
    notReady: () => source.notReady(),
    stop: () => {
      unwatch();
      source.stop();
    },
    settled: () => source.settled(),
    clusters: () => source.clusters(),
  };
}

export async function openReplicaFiles(url: string, file: string, digest: string, takeOver: boolean) {
  const { endpoints, prefix } = parseEtcdUrl(url);
  const { ReplicaFiles } = await import('../store/etcd/replica-files.js');
  return ReplicaFiles.open({ endpoints, prefix, file, digest, takeOver });
}
