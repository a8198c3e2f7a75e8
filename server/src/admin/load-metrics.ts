/**
 * Load-aware balancing in /metrics, read from the load controller at scrape
 * time: per service, offered load, capacity, spill fraction and replicas;
 * per backend locality, load landing there and its capacity; per client tree
 * node, offered load. Per-locality and per-node series are capped at
 * MAX_SERIES label values a service (the largest; the rest summed as
 * "other"). No per-client labels.
 */
import { Gauge, type Registry } from 'prom-client';
import type { LoadController } from '../sessions/load-controller.js';

/** Label values per service and metric: the label sets stay bounded however many localities and nodes there are. */
export const MAX_SERIES = 50;

export function registerLoadMetrics(registry: Registry, load: LoadController): void {
  const registers = [registry];
  const reports = () =>
    load
      .loadAwareServices()
      .map((service) => ({ service, report: load.report(service) }))
      .filter((r): r is { service: string; report: NonNullable<ReturnType<LoadController['report']>> } => !!r.report);
  type Report = NonNullable<ReturnType<LoadController['report']>>;
  /** A gauge with one value per load-aware service, read from its last interval. */
  const perService = (name: string, help: string, value: (r: Report) => number): void => {
    new Gauge({
      name,
      help,
      labelNames: ['service'],
      registers,
      collect() {
        this.reset();
        for (const { service, report } of reports()) this.set({ service }, value(report));
      },
    });
  };
  perService(
    'canopy_load_offered_rps',
    'Requests per second clients report sending to a load-aware service (smoothed)',
    (r) => r.clientNodes.reduce((s, n) => s + n.offeredRps, 0),
  );
  perService(
    'canopy_load_capacity_rps',
    'Capacity of a load-aware service (healthy endpoints × capacityRps × utilizationTarget, drained localities excluded)',
    (r) => r.localities.reduce((s, l) => s + l.capacityRps, 0),
  );
  perService(
    'canopy_load_spill_fraction',
    "Fraction of a load-aware service's offered load that its weights send past each client node's nearest tier",
    (r) => r.spillFraction,
  );
  perService(
    'canopy_load_replicas',
    "Replicas whose clients' load a load-aware service was planned from (1 without etcd)",
    (r) => r.shared?.replicas.length ?? 1,
  );
  /** A gauge per (service, label) for the MAX_SERIES largest values of a service; the rest summed as "other". */
  const capped = (name: string, help: string, label: string, values: (r: Report) => [string, number][]): void => {
    new Gauge({
      name,
      help: `${help}; at most ${MAX_SERIES} ${label} values a service (the largest), the rest summed as "other"`,
      labelNames: ['service', label],
      registers,
      collect() {
        this.reset();
        for (const { service, report } of reports()) {
          const byValue = values(report).sort((a, b) => b[1] - a[1]);
          for (const [k, v] of byValue.slice(0, MAX_SERIES)) this.set({ service, [label]: k }, v);
          const rest = byValue.slice(MAX_SERIES).reduce((t, [, v]) => t + v, 0);
          if (byValue.length > MAX_SERIES) this.set({ service, [label]: 'other' }, rest);
        }
      },
    });
  };
  capped(
    'canopy_load_landed_rps',
    'Requests per second clients report landing on each backend locality of a load-aware service (smoothed)',
    'locality',
    (r) => Object.entries(r.landedRps),
  );
  capped(
    'canopy_load_locality_capacity_rps',
    'Capacity of each backend locality of a load-aware service (0 while drained)',
    'locality',
    (r) => r.localities.map((l) => [l.path, l.capacityRps]),
  );
  capped(
    'canopy_load_node_offered_rps',
    'Requests per second the clients of each client tree node offer a load-aware service (smoothed)',
    'node',
    (r) => r.clientNodes.map((n) => [n.path || '(root)', n.offeredRps]),
  );
}
