/**
 * The Kubernetes source in /metrics, read from its counters at scrape time:
 * whether the first full sync is written and the API server answers, events
 * seen per resource, store writes per kind, failed requests, and the
 * services it refuses or leaves to another owner.
 */
import { Gauge, type Registry } from 'prom-client';
import type { ClusterStatus } from './kube-clusters.js';
import type { KubeStats } from './kube-source.js';

export function registerKubeMetrics(registry: Registry, stats: () => KubeStats): void {
  const registers = [registry];
  const gauge = (name: string, help: string, value: (s: KubeStats) => number): void => {
    new Gauge({
      name,
      help,
      registers,
      collect() {
        this.set(value(stats()));
      },
    });
  };
  const labelled = (name: string, help: string, label: string, values: (s: KubeStats) => [string, number][]) => {
    new Gauge({
      name,
      help,
      labelNames: [label],
      registers,
      collect() {
        for (const [v, n] of values(stats())) this.set({ [label]: v }, n);
      },
    });
  };
  gauge('canopy_kube_synced', '1 once the first full list of Services, EndpointSlices and Nodes is written', (s) =>
    s.synced ? 1 : 0,
  );
  gauge('canopy_kube_connected', '1 while the API server answers the lists and watches', (s) => (s.connected ? 1 : 0));
  labelled('canopy_kube_events_total', 'Objects added, changed or deleted, as the watches saw them', 'resource', (s) =>
    Object.entries(s.events),
  );
  labelled(
    'canopy_kube_writes_total',
    'Store writes of the Kubernetes source (unchanged: nothing to write)',
    'op',
    (s) => Object.entries(s.writes),
  );
  gauge('canopy_kube_request_errors_total', 'Lists and watches the API server failed or refused', (s) => s.errors);
  gauge('canopy_kube_services', 'Canopy services the Kubernetes source writes', (s) => s.services);
  gauge(
    'canopy_kube_rejected_services',
    'Kubernetes Services not written because of an error (see the log)',
    (s) => s.rejected,
  );
  gauge(
    'canopy_kube_foreign_services',
    'Services the Kubernetes source derives but the file or the API owns',
    (s) => s.foreign,
  );
  gauge(
    'canopy_kube_foreign_hints',
    'Endpoints hinted for zones other than (or beside) their own (followed under trafficDistribution)',
    (s) => s.foreignHints,
  );
}

/** Several clusters: per cluster, whether its first list is written and how long its API server has not answered. */
export function registerClusterMetrics(registry: Registry, clusters: () => readonly ClusterStatus[]): void {
  const per = (name: string, help: string, value: (c: ClusterStatus) => number) =>
    new Gauge({
      name,
      help,
      labelNames: ['cluster'],
      registers: [registry],
      collect() {
        this.reset();
        for (const c of clusters()) this.set({ cluster: c.name }, value(c));
      },
    });
  per('canopy_kube_cluster_synced', "1 once the cluster's first full list is written", (c) => (c.synced ? 1 : 0));
  per('canopy_kube_cluster_connected', "1 while the cluster's API server answers", (c) => (c.connected ? 1 : 0));
  per(
    'canopy_kube_cluster_stale_seconds',
    "How long the cluster's API server has not answered (0 while it does); its endpoints are its last state",
    (c) => c.staleSeconds,
  );
  per('canopy_kube_cluster_endpoints', 'Endpoints the cluster gives the mesh', (c) => c.endpoints);
}
