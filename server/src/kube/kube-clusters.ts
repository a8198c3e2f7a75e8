/**
 * Several Kubernetes clusters at once (docs/kubernetes.md, "Several
 * clusters"): one KubeSource per cluster, each with its own watches, backoff
 * and readiness, writing through one ClusterUnion (kube/kube-union.ts).
 * Each cluster fails alone: an API server that stops answering leaves its
 * cluster's endpoints as they were, and the status says which cluster is
 * stale and since when. The list can change while Canopy runs (`update`):
 * a cluster added starts its watches, one removed takes its endpoints away.
 *
 * A cluster's first list is a burst of garbage (the response, client-node's
 * objects, the writes) that V8 keeps in RSS long after it is written: once
 * first syncs have stopped for a second, one full collection returns it, so a
 * cluster added costs what Canopy keeps of it (docs/kubernetes.md, the cost
 * table).
 */
import { KubeConfig } from '@kubernetes/client-node';
import { fullCollection } from '../platform/full-collection.js';
import { KubeSource, type KubeSourceOptions, type KubeStats } from './kube-source.js';
import { ClusterUnion } from './kube-union.js';
import { KubeWriter } from './kube-writer.js';
import type { Store } from '../store/store.js';

/** One cluster: its name (the `cluster` scope), network (the `network` scope) and where its API server is. */
export interface KubeCluster {
  readonly name: string;
  readonly network: string;
  /** A kubeconfig file; without it, the pod's in-cluster service account. */
  readonly kubeconfig?: string;
}

export type KubeClustersOptions = Omit<KubeSourceOptions, 'config' | 'cluster' | 'sink'> & {
  readonly clusters: readonly KubeCluster[];
};

/** One cluster as `GET /api/v1/clusters` and `canopy get clusters` show it. */
export interface ClusterStatus {
  readonly name: string;
  readonly network: string;
  readonly server: string;
  /** Its first full list is written. */
  readonly synced: boolean;
  /** Its API server answers every list and watch now. */
  readonly connected: boolean;
  /** While it does not: since when (ISO 8601) and for how long; its endpoints are its last state. */
  readonly staleSince?: string;
  readonly staleSeconds: number;
  readonly lastError?: string;
  readonly services: number;
  readonly endpoints: number;
}

/** Quiet this long after the last first sync before the collection. */
const COLLECT_AFTER_SYNC_MS = 1000;

interface Running {
  readonly cluster: KubeCluster;
  readonly server: string;
  readonly source: KubeSource;
}

export class KubeClusters {
  private readonly running = new Map<string, Running>();
  private readonly writer: KubeWriter;
  private readonly union: ClusterUnion;
  private updating: Promise<void> = Promise.resolve();
  private collection: NodeJS.Timeout | undefined;
  private collect: ((opts: object) => void) | undefined;

  constructor(private readonly opts: KubeClustersOptions) {
    this.writer = new KubeWriter(opts.store, (name, owner) =>
      opts.log.warn({ service: name, owner }, `kubernetes: "${name}" is owned by the ${owner}: not written`),
    );
    this.union = new ClusterUnion(opts.store, this.writer);
  }

  get store(): Store {
    return this.opts.store;
  }

  start(): void {
    this.union.setOrder(this.opts.clusters.map((c) => c.name));
    for (const c of this.opts.clusters) this.startCluster(c);
  }

  /** The list changed (a reload): clusters added start, removed ones stop and take their endpoints away. */
  update(clusters: readonly KubeCluster[]): Promise<void> {
    this.updating = this.updating.then(() => this.apply(clusters));
    return this.updating;
  }

  private async apply(clusters: readonly KubeCluster[]): Promise<void> {
    const wanted = new Map(clusters.map((c) => [c.name, c]));
    this.union.setOrder(clusters.map((c) => c.name));
    for (const [name, r] of [...this.running]) {
      const next = wanted.get(name);
      if (next && next.kubeconfig === r.cluster.kubeconfig && next.network === r.cluster.network) continue;
      r.source.stop();
      await r.source.settled();
      this.running.delete(name);
      if (next) {
        // Changed: the new watches re-list; until they have, the cluster's stored endpoints stay.
        this.union.forget(name);
        this.opts.log.info({ cluster: name }, 'kubernetes: cluster changed: watching it again');
      } else {
        await this.union.removeCluster(name);
        this.opts.log.info({ cluster: name }, 'kubernetes: cluster removed: its endpoints are gone');
      }
    }
    for (const c of clusters) if (!this.running.has(c.name)) this.startCluster(c);
  }

  private startCluster(c: KubeCluster): void {
    const config = new KubeConfig();
    if (c.kubeconfig !== undefined) config.loadFromFile(c.kubeconfig);
    else config.loadFromCluster();
    const { clusters: _, log, ...common } = this.opts;
    const source = new KubeSource({
      ...common,
      config,
      log: log.child({ cluster: c.name }),
      cluster: { name: c.name, network: c.network },
      sink: this.union.sinkFor(c.name),
      firstSync: () => this.collectSoon(),
    });
    const server = config.getCurrentCluster()?.server ?? '';
    this.running.set(c.name, { cluster: c, server, source });
    source.start();
    log.info({ cluster: c.name, network: c.network, server }, 'kubernetes: watching cluster');
  }

  stop(): void {
    clearTimeout(this.collection);
    for (const r of this.running.values()) r.source.stop();
  }

  /**
   * One full collection once first syncs have stopped for COLLECT_AFTER_SYNC_MS:
   * V8's memory-reducing one (its `last-resort` flavour, what a low-memory
   * notification runs), as a plain collection frees the garbage but keeps
   * the pages it was in.
   */
  private collectSoon(): void {
    clearTimeout(this.collection);
    const collect = (this.collect ??= fullCollection() as (opts: object) => void);
    this.collection = setTimeout(
      () => collect({ type: 'major', execution: 'sync', flavor: 'last-resort' }),
      COLLECT_AFTER_SYNC_MS,
    );
    this.collection.unref();
  }

  async settled(): Promise<void> {
    await this.updating;
    for (const r of this.running.values()) await r.source.settled();
  }

  /** Why /readyz should answer 503: the first cluster (in list order) not ready, by name. */
  notReady(now = Date.now()): string | undefined {
    for (const r of this.running.values()) {
      const why = r.source.notReady(now);
      if (why !== undefined) {
        const since = r.source.health().failingSince;
        const at = since === undefined ? '' : ` (stale since ${new Date(since).toISOString()})`;
        return `cluster ${r.cluster.name}${at}: ${why}`;
      }
    }
    return undefined;
  }

  clusters(now = Date.now()): ClusterStatus[] {
    const counts = this.union.counts();
    return [...this.running.values()].map((r) => {
      const h = r.source.health();
      const held = counts.get(r.cluster.name);
      return {
        name: r.cluster.name,
        network: r.cluster.network,
        server: r.server,
        synced: h.synced,
        connected: h.failingSince === undefined,
        ...(h.failingSince !== undefined ? { staleSince: new Date(h.failingSince).toISOString() } : {}),
        staleSeconds: h.failingSince === undefined ? 0 : Math.max(0, (now - h.failingSince) / 1000),
        ...(h.lastError !== undefined ? { lastError: h.lastError } : {}),
        services: held?.services ?? 0,
        endpoints: held?.endpoints ?? 0,
      };
    });
  }

  /** The sources' counters summed, for the single-cluster metrics (canopy_kube_*). */
  stats(): KubeStats {
    const all = [...this.running.values()].map((r) => r.source.stats());
    const sum = (f: (s: KubeStats) => number) => all.reduce((n, s) => n + f(s), 0);
    const events: Record<string, number> = {};
    for (const s of all) for (const [k, v] of Object.entries(s.events)) events[k] = (events[k] ?? 0) + v;
    return {
      synced: all.every((s) => s.synced),
      connected: all.every((s) => s.connected),
      events: events as KubeStats['events'],
      writes: { ...this.writer.counts },
      errors: sum((s) => s.errors),
      rejected: sum((s) => s.rejected),
      foreign: this.writer.foreign.size,
      foreignHints: sum((s) => s.foreignHints),
      services: this.union.size,
    };
  }
}
