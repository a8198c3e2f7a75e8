/**
 * Load-aware balancing in /metrics, read from the load controller at scrape
 * time: offered load per service, load landing on each backend locality
 * (at most MAX_LOCALITIES label values a service, the rest summed as
 * "other"), and the fraction of offered load sent past each client node's
 * nearest tier (the spill). No per-client labels.
 */
import { Gauge, type Registry } from 'prom-client';
import type { LoadController } from '../sessions/load-controller.js';

const MAX_LOCALITIES = 50;

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
  new Gauge({
    name: 'canopy_load_landed_rps',
    help: 'Requests per second clients report landing on each backend locality of a load-aware service (smoothed)',
    labelNames: ['service', 'locality'],
    registers,
    collect() {
      this.reset();
      for (const { service, report } of reports()) {
        const byLoad = Object.entries(report.landedRps).sort((a, b) => b[1] - a[1]);
        for (const [locality, rps] of byLoad.slice(0, MAX_LOCALITIES)) this.set({ service, locality }, rps);
        const rest = byLoad.slice(MAX_LOCALITIES).reduce((s, [, v]) => s + v, 0);
        if (rest > 0) this.set({ service, locality: 'other' }, rest);
      }
    },
  });
}
