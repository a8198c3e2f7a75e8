/**
 * prom-client metrics for one app instance, fed by the xDS observer and by
 * collect-time reads of the CLA cache and the trees.
 */
import { collectDefaultMetrics, Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { ClaCacheStats } from '../domain/cla-cache.js';
import { REFUSAL_REASONS, type XdsObserver } from '../sessions/observer.js';
import { shortTypeName } from '../resources/type-urls.js';

export interface MetricSources {
  readonly claCache: () => ClaCacheStats;
  readonly treeNodes: () => number;
  readonly connectedClients: () => number;
  /** Bytes of subscription state clients hold now, and the server's budget for it. */
  readonly subscriptions?: () => { readonly bytes: number; readonly budget: number };
}

/** The xDS observer that feeds the registry, and the registry /metrics serves. */
export interface CanopyMetrics extends XdsObserver {
  readonly registry: Registry;
}

/** 1-2.5-5 per decade from 1 ms to 10 s: a local push takes milliseconds, a debounced storm seconds. */
export const PUSH_LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

export function createMetrics(registry: Registry, sources: MetricSources): CanopyMetrics {
  const registers = [registry];
  collectDefaultMetrics({ register: registry });
  new Gauge({
    name: 'canopy_xds_connected_clients',
    help: 'ADS streams open now',
    registers,
    collect() {
      this.set(sources.connectedClients());
    },
  });
  const responses = new Counter({
    name: 'canopy_xds_responses_total',
    help: 'DiscoveryResponses written',
    labelNames: ['type'],
    registers,
  });
  const resources = new Counter({
    name: 'canopy_xds_resources_sent_total',
    help: 'Resources carried by DiscoveryResponses',
    labelNames: ['type'],
    registers,
  });
  const pushLatency = new Histogram({
    name: 'canopy_xds_push_latency_seconds',
    help: 'From a change to the response that carries it, per stream',
    labelNames: ['type'],
    buckets: PUSH_LATENCY_BUCKETS,
    registers,
  });
  const acks = new Counter({ name: 'canopy_xds_acks_total', help: 'ACKs received', labelNames: ['type'], registers });
  const nacks = new Counter({
    name: 'canopy_xds_nacks_total',
    help: 'NACKs received',
    labelNames: ['type'],
    registers,
  });
  const stale = new Counter({
    name: 'canopy_xds_stale_nonces_total',
    help: 'Requests ignored for a stale nonce',
    labelNames: ['type'],
    registers,
  });
  const streams = new Counter({ name: 'canopy_xds_streams_opened_total', help: 'ADS streams opened', registers });
  const refused = new Counter({
    name: 'canopy_xds_refused_requests_total',
    help:
      'Requests refused: for a type not served (ignored, no state kept), or over a stream, connection or ' +
      'server-wide limit (stream ended)',
    labelNames: ['reason'],
    registers,
  });
  // Every reason is listed from the start, at zero: an alert on it needs the series to exist.
  for (const reason of REFUSAL_REASONS) refused.inc({ reason }, 0);
  const subscriptions = sources.subscriptions;
  if (subscriptions) {
    new Gauge({
      name: 'canopy_xds_subscription_bytes',
      help: 'Bytes of subscription state ADS clients hold now (names and their bookkeeping)',
      registers,
      collect() {
        this.set(subscriptions().bytes);
      },
    });
    new Gauge({
      name: 'canopy_xds_subscription_budget_bytes',
      help: 'The most subscription state all ADS clients together may hold (--xds-subscription-budget)',
      registers,
      collect() {
        this.set(subscriptions().budget);
      },
    });
  }
  const oversized = new Counter({
    name: 'canopy_xds_oversized_responses_total',
    help: "Responses over gRPC's default 4 MiB receive limit (a default client ends its stream)",
    labelNames: ['type'],
    registers,
  });
  // The cache owns its counters; these mirror them at scrape time.
  new Counter({
    name: 'canopy_cla_cache_hits_total',
    help: 'CLA lookups served from the cache',
    registers,
    collect() {
      this.reset();
      this.inc(sources.claCache().hits);
    },
  });
  new Counter({
    name: 'canopy_cla_cache_misses_total',
    help: 'CLA lookups that built and encoded a CLA',
    registers,
    collect() {
      this.reset();
      this.inc(sources.claCache().misses);
    },
  });
  new Gauge({
    name: 'canopy_cla_cache_entries',
    help: 'Distinct CLAs held (bounded by tree nodes, not clients)',
    registers,
    collect() {
      this.set(sources.claCache().entries);
    },
  });
  new Gauge({
    name: 'canopy_tree_nodes',
    help: 'Nodes in all locality trees',
    registers,
    collect() {
      this.set(sources.treeNodes());
    },
  });

  return {
    registry,
    streamOpened: () => streams.inc(),
    streamClosed: () => {},
    responseSent: (typeUrl, n) => {
      responses.inc({ type: shortTypeName(typeUrl) });
      resources.inc({ type: shortTypeName(typeUrl) }, n);
    },
    pushed: (typeUrl, seconds) => pushLatency.observe({ type: shortTypeName(typeUrl) }, seconds),
    acked: (typeUrl) => acks.inc({ type: shortTypeName(typeUrl) }),
    nacked: (typeUrl) => nacks.inc({ type: shortTypeName(typeUrl) }),
    staleNonce: (typeUrl) => stale.inc({ type: shortTypeName(typeUrl) }),
    requestRefused: (reason) => refused.inc({ reason }),
    oversizedResponse: (typeUrl) => oversized.inc({ type: shortTypeName(typeUrl) }),
  };
}
