/**
 * Several Kubernetes clusters as one mesh: a Service of one name and
 * namespace in several clusters is one Canopy service whose endpoints are the
 * union of theirs (as Istio's multi-cluster and Kubernetes' multi-cluster
 * Services treat it), each endpoint tagged with its cluster and network.
 *
 * Each cluster's KubeSource writes through its own share (`sinkFor`); the
 * union keeps every cluster's last spec per name and writes the composite
 * through one KubeWriter, so the store holds one service and the writer's
 * difference-only writes hold: a change in one cluster patches that
 * cluster's endpoints only, whatever the number of clusters. The settings
 * (ports, VIPs, loadBalancing) are the first cluster's in the configured
 * order that has the Service.
 *
 * A cluster that has not synced yet (an API server down since Canopy
 * started, or a replica just started) contributes what the store holds of
 * it: its endpoints stay until its API server answers, so a restart or a
 * second replica never drops another cluster's endpoints. A cluster removed
 * from the list takes its endpoints with it; the others stay untouched.
 */
import { endpointKey, type Endpoint, type ServiceSpec } from '../domain/service.js';
import type { KubeSink } from './kube-source.js';
import type { KubeWriter } from './kube-writer.js';
import type { Store } from '../store/store.js';

export class ClusterUnion {
  /** name → cluster → that cluster's last spec. */
  private readonly specs = new Map<string, Map<string, ServiceSpec>>();
  private order: readonly string[] = [];
  private readonly synced = new Set<string>();

  constructor(
    private readonly store: Store,
    private readonly writer: KubeWriter,
  ) {}

  /** The clusters in the configured order (the first with a Service gives its settings). */
  setOrder(clusters: readonly string[]): void {
    this.order = clusters;
  }

  sinkFor(cluster: string): KubeSink {
    return {
      write: (spec) => this.put(cluster, spec),
      remove: (name) => this.drop(cluster, name),
      prune: (current) => this.firstSync(cluster, current),
      counts: this.writer.counts,
      foreign: this.writer.foreign,
    };
  }

  /** Every name with an endpoint in `cluster`, by this union's view. */
  namesOf(cluster: string): string[] {
    return [...this.specs].filter(([, by]) => by.has(cluster)).map(([n]) => n);
  }

  /** Canopy services the union writes. */
  get size(): number {
    return this.specs.size;
  }

  /** Per cluster: the services it has and their endpoints. */
  counts(): Map<string, { services: number; endpoints: number }> {
    const out = new Map<string, { services: number; endpoints: number }>();
    for (const by of this.specs.values())
      for (const [cluster, spec] of by) {
        const c = out.get(cluster) ?? { services: 0, endpoints: 0 };
        c.services++;
        c.endpoints += spec.endpoints.length;
        out.set(cluster, c);
      }
    return out;
  }

  /**
   * A cluster's watches start over (its kubeconfig or network changed): its
   * specs are dropped without a write, so until its new first sync its
   * stored endpoints stay, as for a cluster not yet synced.
   */
  forget(cluster: string): void {
    this.synced.delete(cluster);
    for (const [name, by] of this.specs) if (by.delete(cluster) && by.size === 0) this.specs.delete(name);
  }

  /** A cluster left the list: its endpoints go, the services only it had are deleted. */
  async removeCluster(cluster: string): Promise<void> {
    this.synced.delete(cluster);
    const names = this.namesOf(cluster);
    for (const name of names) this.specs.get(name)!.delete(cluster);
    // What the store holds of it from an earlier run goes too.
    const { services } = await this.store.list();
    const held = services.filter((s) => s.owner === 'kube' && s.spec.endpoints.some((e) => e.cluster === cluster));
    for (const n of new Set([...names, ...held.map((s) => s.spec.name)])) await this.compose(n, cluster);
  }

  private async put(cluster: string, spec: ServiceSpec): Promise<void> {
    let by = this.specs.get(spec.name);
    if (!by) this.specs.set(spec.name, (by = new Map()));
    by.set(cluster, spec);
    await this.compose(spec.name);
  }

  private async drop(cluster: string, name: string): Promise<void> {
    const by = this.specs.get(name);
    if (!by?.delete(cluster)) return;
    await this.compose(name);
  }

  /**
   * A cluster's first full list is written: what the store held of it that
   * it no longer has goes (from each service it is in), and once every
   * cluster has synced, the services no cluster has are deleted.
   */
  private async firstSync(cluster: string, current: ReadonlySet<string>): Promise<string[]> {
    this.synced.add(cluster);
    const { services } = await this.store.list();
    for (const s of services) {
      if (s.owner !== 'kube' || current.has(s.spec.name)) continue;
      if (s.spec.endpoints.some((e) => e.cluster === cluster)) await this.compose(s.spec.name);
    }
    if (!this.order.every((c) => this.synced.has(c))) return [];
    return this.writer.prune(new Set(this.specs.keys()));
  }

  /** Writes the union of `name` as the clusters now have it; `gone` is a cluster whose stored endpoints go. */
  private async compose(name: string, gone?: string): Promise<void> {
    const spec = await this.composite(name, gone);
    if ((this.specs.get(name)?.size ?? 0) === 0) this.specs.delete(name);
    if (spec === undefined) return this.writer.remove(name);
    // After a conflict the other clusters' stored endpoints are read again: another replica's write stays.
    await this.writer.write(spec, async () => (await this.composite(name, gone)) ?? spec);
  }

  /** The union of `name`, or undefined when no cluster has it any more. */
  private async composite(name: string, gone?: string): Promise<ServiceSpec | undefined> {
    const by = this.specs.get(name) ?? new Map<string, ServiceSpec>();
    const waiting = this.order.filter((c) => !this.synced.has(c) && !by.has(c) && c !== gone);
    const stored = waiting.length > 0 ? await this.storedOf(name, new Set(waiting)) : undefined;
    const kept = stored?.endpoints ?? [];
    const ranked = [...by].sort(([a], [b]) => this.rank(a) - this.rank(b));
    const head = ranked[0]?.[1] ?? (kept.length > 0 ? stored?.spec : undefined);
    if (!head) return undefined;
    if (ranked.length === 1 && kept.length === 0) return head;
    const seen = new Set<string>();
    const endpoints: Endpoint[] = [];
    for (const e of [...ranked.flatMap(([, s]) => s.endpoints), ...kept]) {
      const k = endpointKey(e);
      if (seen.has(k)) continue; // the same address:port in two clusters: the first cluster's
      seen.add(k);
      endpoints.push(e);
    }
    return { ...head, endpoints };
  }

  private rank(cluster: string): number {
    const i = this.order.indexOf(cluster);
    return i < 0 ? this.order.length : i;
  }

  /** The stored service and its endpoints of clusters that have not synced yet. */
  private async storedOf(
    name: string,
    clusters: ReadonlySet<string>,
  ): Promise<{ spec: ServiceSpec; endpoints: Endpoint[] } | undefined> {
    const s = await this.store.get(name);
    if (!s || s.owner !== 'kube') return undefined;
    return { spec: s.spec, endpoints: s.spec.endpoints.filter((e) => clusters.has(e.cluster)) };
  }
}
