/**
 * Load-aware locality: client load reports (LRS) → weights per client node,
 * recomputed every interval. Replicas on etcd share per-replica aggregates
 * and plan from their sum.
 */
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { registerLoadMetrics } from '../admin/load-metrics.js';
import { LoadController } from '../sessions/load-controller.js';
import type { PushPipeline } from '../sessions/push-pipeline.js';
import type { MeshView } from '../store/mesh-feed.js';
import { parseEtcdUrl } from '../store/open-store.js';
import type { Store } from '../store/store.js';
import { LoadPlanKeeper, restoreLoadPlans } from './load-keep.js';
import type { CanopyOptions } from './options.js';

export const DEFAULT_LOAD_REPORTING_INTERVAL_MS = 10_000;

export interface Load {
  readonly controller: LoadController;
  /** Stops planning and leaves the replicas' share. */
  stop(): Promise<void>;
}

export async function startLoad(
  opts: CanopyOptions,
  mesh: MeshView,
  pipeline: PushPipeline,
  registry: Registry,
  logger: Logger,
  store: Store,
): Promise<Load> {
  const intervalMs = opts.config.server.loadReportingIntervalMs ?? DEFAULT_LOAD_REPORTING_INTERVAL_MS;
  const loadShare = opts.storeUrl !== undefined ? await openLoadShare(opts.storeUrl, intervalMs) : undefined;
  let shareFailing = false;
  // The controller is read when an interval's plan is done, after it is built.
  const keeper = new LoadPlanKeeper(store, () => controller.planRecord(), logger);
  const controller = new LoadController({
    mesh,
    intervalMs,
    notify: (services) => pipeline.notify(services),
    onPlanned: () => keeper.planned(),
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
  // Before any client connects: a restarted replica serves the weights it served (load-keep.ts).
  await restoreLoadPlans(store, controller, logger);
  controller.start();
  registerLoadMetrics(registry, controller);
  return {
    controller,
    stop: async () => {
      controller.stop();
      await keeper.settled();
      await loadShare?.close();
    },
  };
}

async function openLoadShare(url: string, intervalMs: number) {
  const { endpoints, prefix } = parseEtcdUrl(url);
  const { EtcdLoadShare } = await import('../store/etcd/load-share.js');
  return EtcdLoadShare.open({ endpoints, prefix, intervalMs });
}
