/**
 * The xDS side of the server, built over the served mesh: the CLA cache, the
 * resource registry, the subscription budget, the metrics that observe it all
 * and the push pipeline the transport hands streams to.
 */
import { readFileSync } from 'node:fs';
import v8 from 'node:v8';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { createMetrics, type CanopyMetrics } from '../admin/metrics.js';
import { kindOf } from '../domain/client.js';
import { fullCollection } from '../platform/full-collection.js';
import { packagePath } from '../platform/paths.js';
import { serverClaCache, type ServerClaCache } from '../resources/endpoint/endpoint.js';
import { canopyResources, type ResourceRegistry } from '../resources/registry.js';
import { teeObserver, type XdsObserver } from '../sessions/observer.js';
import { PushPipeline } from '../sessions/push-pipeline.js';
import { sharedEncodeCount } from '../sessions/shared-responses.js';
import type { MeshFeed } from '../store/mesh-feed.js';
import { defaultXdsLimits, SubscriptionBudget, type XdsLimits } from '../transport/subscription-budget.js';
import type { CanopyOptions } from './options.js';

export interface Xds {
  readonly claCache: ServerClaCache;
  readonly resources: ResourceRegistry;
  readonly limits: XdsLimits;
  readonly budget: SubscriptionBudget;
  /** The metrics, then the caller's observer, if any. */
  readonly observer: XdsObserver;
  readonly metrics: CanopyMetrics;
  readonly pipeline: PushPipeline;
}

export function buildXds(opts: CanopyOptions, feed: MeshFeed, registry: Registry, logger: Logger): Xds {
  const server = opts.config.server;
  const mesh = feed.mesh;
  const claCache = serverClaCache();
  const resources = canopyResources(mesh, claCache, server.lazyXds, { leds: opts.leds ?? server.leds ?? true });
  const limits = { ...defaultXdsLimits(v8.getHeapStatistics().heap_size_limit), ...opts.security?.xdsLimits };
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
  const observer = opts.observer ? teeObserver(metrics, opts.observer) : metrics;
  const pushWindow = opts.pushWindow ?? server.pushWindow;
  const pipeline = new PushPipeline({
    resources,
    observer,
    log: logger.child({ component: 'xds' }),
    debounceMs: opts.debounceMs ?? server.debounceMs ?? 100,
    ...(pushWindow !== undefined ? { pushWindow } : {}),
    collect: fullCollection(),
    originOf: (service) => feed.originOf(service),
  });
  return { claCache, resources, limits, budget, observer, metrics, pipeline };
}

function packageVersion(): string {
  try {
    return (JSON.parse(readFileSync(packagePath('package.json'), 'utf8')) as { version: string }).version;
  } catch {
    return 'unknown';
  }
}
