/**
 * prom-client metrics for one app instance, fed by the xDS observer and by
 * collect-time reads of the CLA cache and the trees.
 */
import type { FastifyInstance } from 'fastify';
import { collectDefaultMetrics, Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { ClaCacheStats } from '../domain/cla-cache.js';
import { CLIENT_KINDS, type ClientKind } from '../domain/client.js';
import { REFUSAL_REASONS, type XdsObserver } from '../sessions/observer.js';
import {
  CLUSTER_TYPE,
  ENDPOINT_TYPE,
  LEDS_TYPE,
  LISTENER_TYPE,
  ROUTE_TYPE,
  shortTypeName,
  TREE_TYPE,
} from '../resources/type-urls.js';
import type { Store } from '../store/store.js';

export interface MetricSources {
  readonly claCache: () => ClaCacheStats;
  readonly treeNodes: () => number;
  readonly connectedClients: () => number;
  /** Bytes of subscription state clients hold now, and the server's budget for it. */
  readonly subscriptions?: () => { readonly bytes: number; readonly budget: number };
  /** Open streams by client kind and protocol (read at scrape time). */
  readonly clientsByKind?: () => readonly { readonly kind: ClientKind; readonly protocol: 'sotw' | 'delta' }[];
  /** Whether the store answers (etcd reachable; always true for the embedded one). */
  readonly storeUp?: () => boolean;
  /** The running version, for canopy_build_info. */
  readonly version?: string;
  /** Responses encoded so far to be shared by every stream that needs the same bytes (read at scrape time). */
  readonly sharedEncodes?: () => number;
}

/** Every type a stream can carry: labelled series exist at zero before their first event. */
const TYPE_LABELS = [LISTENER_TYPE, ROUTE_TYPE, CLUSTER_TYPE, ENDPOINT_TYPE, LEDS_TYPE, TREE_TYPE].map(shortTypeName);
const PROTOCOLS = ['sotw', 'delta'] as const;

/** The xDS observer that feeds the registry, and the registry /metrics serves. */
export interface CanopyMetrics extends XdsObserver {
  readonly registry: Registry;
}

/** 1-2.5-5 per decade from 1 ms to 10 s: a local push takes milliseconds, a debounced storm seconds. */
export const PUSH_LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

export function createMetrics(registry: Registry, sources: MetricSources): CanopyMetrics {
  collectDefaultMetrics({ register: registry });
  const { responses, resources, pushLatency, acks, nacks, stale, streams, refused, oversized } = xdsCounters(
    registry,
    sources,
  );
  // Per service: the one service a NACKed response carried, or "(several)" (its halves are sent again apart).
  const nacksByService = new Counter({
    name: 'canopy_xds_nacks_by_service_total',
    help: 'NACKs received, by type and the service whose resources the rejected response carried',
    labelNames: ['type', 'service'],
    registers: [registry],
  });
  stateGauges(registry, sources);
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
    nacked: (typeUrl, _node, _detail, service) => {
      nacks.inc({ type: shortTypeName(typeUrl) });
      if (service !== undefined) nacksByService.inc({ type: shortTypeName(typeUrl), service });
    },
    staleNonce: (typeUrl) => stale.inc({ type: shortTypeName(typeUrl) }),
    requestRefused: (reason) => refused.inc({ reason }),
    oversizedResponse: (typeUrl) => oversized.inc({ type: shortTypeName(typeUrl) }),
  };
}

/** The xDS counters the observer moves, in the order /metrics lists them. */
function xdsCounters(registry: Registry, sources: MetricSources) {
  const registers = [registry];
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
  subscriptionGauges(registers, sources);
  const oversized = new Counter({
    name: 'canopy_xds_oversized_responses_total',
    help: "Responses over gRPC's default 4 MiB receive limit (a default client ends its stream)",
    labelNames: ['type'],
    registers,
  });
  for (const type of TYPE_LABELS)
    for (const c of [responses, resources, acks, nacks, stale, oversized]) c.inc({ type }, 0);
  return { responses, resources, pushLatency, acks, nacks, stale, streams, refused, oversized };
}

/** Subscription state held against its budget, when the server has one. */
function subscriptionGauges(registers: Registry[], sources: MetricSources): void {
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
}

/** What the server holds now, read at scrape time: version, clients, store, CLA cache, trees. */
function stateGauges(registry: Registry, sources: MetricSources): void {
  const registers = [registry];
  new Gauge({
    name: 'canopy_build_info',
    help: 'Always 1: the running version and Node.js version as labels',
    labelNames: ['version', 'node_version'],
    registers,
  }).set({ version: sources.version ?? 'unknown', node_version: process.version }, 1);
  new Gauge({
    name: 'canopy_xds_clients',
    help: 'ADS streams open now, by client kind (envoy, grpc, agent) and protocol (sotw, delta)',
    labelNames: ['kind', 'protocol'],
    registers,
    collect() {
      const counts = new Map<string, number>();
      for (const c of sources.clientsByKind?.() ?? [])
        counts.set(`${c.kind}/${c.protocol}`, (counts.get(`${c.kind}/${c.protocol}`) ?? 0) + 1);
      for (const kind of CLIENT_KINDS)
        for (const protocol of PROTOCOLS) this.set({ kind, protocol }, counts.get(`${kind}/${protocol}`) ?? 0);
    },
  });
  new Gauge({
    name: 'canopy_store_up',
    help: '1 while the store answers (etcd reachable); 0 while the last state is served without it',
    registers,
    collect() {
      this.set(sources.storeUp?.() === false ? 0 : 1);
    },
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
  const sharedEncodes = sources.sharedEncodes;
  if (sharedEncodes) {
    new Counter({
      name: 'canopy_xds_shared_encodes_total',
      help:
        'DiscoveryResponses encoded once and shared by every stream that needs the same bytes: a push adds ' +
        'one per distinct response, however many streams it goes to',
      registers,
      collect() {
        this.reset();
        this.inc(sharedEncodes());
      },
    });
  }
  new Gauge({
    name: 'canopy_tree_nodes',
    help: 'Nodes in all locality trees',
    registers,
    collect() {
      this.set(sources.treeNodes());
    },
  });
}

/** Store write durations and failures by operation; the label set is the Store's write methods. */
const STORE_WRITES = ['put', 'putMany', 'putAll', 'patchEndpoints', 'editEndpoints', 'delete'] as const;

export function instrumentStore(store: Store, registry: Registry): Store {
  const registers = [registry];
  const seconds = new Histogram({
    name: 'canopy_store_write_duration_seconds',
    help: 'Durable store writes, from the call to the acknowledged write, by operation',
    labelNames: ['op'],
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers,
  });
  const failures = new Counter({
    name: 'canopy_store_write_failures_total',
    help: 'Store writes that failed (a conflict retried by the caller counts too), by operation',
    labelNames: ['op'],
    registers,
  });
  for (const op of STORE_WRITES) {
    seconds.zero({ op });
    failures.inc({ op }, 0);
  }
  // The writes are wrapped; everything else is the store's own, called on the store itself (a method called on a
  // wrapper object would keep its state there, apart from the store's).
  const timed = new Map<string | symbol, (...args: unknown[]) => Promise<unknown>>();
  for (const op of STORE_WRITES) {
    const write = (store[op] as (...args: unknown[]) => Promise<unknown>).bind(store);
    timed.set(op, async (...args: unknown[]) => {
      const end = seconds.startTimer({ op });
      try {
        return await write(...args);
      } catch (err) {
        failures.inc({ op });
        throw err;
      } finally {
        end();
      }
    });
  }
  return new Proxy(store, {
    get(target, prop) {
      const wrapped = timed.get(prop);
      if (wrapped) return wrapped;
      const value = Reflect.get(target, prop, target) as unknown;
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
}

/** Config-file loads and reloads: result counts and the time of the last success. */
export interface ConfigReloadMetrics {
  loaded(result: 'success' | 'invalid' | 'store_error'): void;
}

export function configReloadMetrics(registry: Registry): ConfigReloadMetrics {
  const registers = [registry];
  const results = ['success', 'invalid', 'store_error'] as const;
  const reloads = new Counter({
    name: 'canopy_config_reloads_total',
    help: 'Config file loads (at start) and reloads (on edit), by result: success, invalid (kept the running config), store_error',
    labelNames: ['result'],
    registers,
  });
  for (const result of results) reloads.inc({ result }, 0);
  const lastSuccess = new Gauge({
    name: 'canopy_config_last_reload_success_timestamp_seconds',
    help: 'Unix time of the last config file load that was applied',
    registers,
  });
  return {
    loaded(result) {
      reloads.inc({ result });
      if (result === 'success') lastSuccess.set(Date.now() / 1000);
    },
  };
}

/** Admin API requests by method, route pattern (not the raw URL: bounded) and status class. */
export function instrumentAdmin(app: FastifyInstance, registry: Registry): void {
  const registers = [registry];
  const requests = new Counter({
    name: 'canopy_admin_requests_total',
    help: 'Admin API requests by method, route pattern and status code class (2xx, 4xx, ...)',
    labelNames: ['method', 'route', 'status'],
    registers,
  });
  const seconds = new Histogram({
    name: 'canopy_admin_request_duration_seconds',
    help: 'Admin API request durations by method and route pattern',
    labelNames: ['method', 'route'],
    buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10],
    registers,
  });
  const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);
  app.addHook('onResponse', async (req, reply) => {
    const method = METHODS.has(req.method) ? req.method : 'OTHER';
    // An unmatched URL is one series, whatever was asked.
    const route = req.routeOptions.url ?? 'unmatched';
    requests.inc({ method, route, status: `${Math.floor(reply.statusCode / 100)}xx` });
    seconds.observe({ method, route }, reply.elapsedTime / 1000);
  });
}
