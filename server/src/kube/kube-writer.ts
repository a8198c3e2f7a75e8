/**
 * The Kubernetes source as a writer of the store, under the ownership rule
 * (docs/operations.md, "Ownership"): it owns the services it derives
 * (owner `kube`), never writes over one the file or the API owns, and writes
 * only what changed: a PUT when the service's settings change, else a PATCH
 * of the endpoints that differ from its last write.
 *
 * Every write is conditional on the revision of its last write (as the file
 * source's are): a write by anyone else in between (an API PATCH, another
 * replica's source) fails it, and the service is read back and written again
 * against what the store holds. So replicas on one etcd converge without
 * writing the same change twice, and an API PATCH of a Kubernetes endpoint
 * lasts until Kubernetes next changes that service.
 */
import { endpointKey, sameEndpoint, type Endpoint, type ServiceSpec } from '../domain/service.js';
import { serviceSpecToJson } from '../domain/spec.js';
import { StoreConflict, type Owner, type Store } from '../store/store.js';

interface Written {
  revision: number;
  readonly head: string;
  readonly endpoints: Map<string, Endpoint>;
}

export interface KubeWriteCounts {
  put: number;
  patch: number;
  delete: number;
  unchanged: number;
}

const ATTEMPTS = 5;

export class KubeWriter {
  private readonly written = new Map<string, Written>();
  /** Names the file or the API owns, and which: the source leaves them alone. */
  readonly foreign = new Map<string, Owner>();
  readonly counts: KubeWriteCounts = { put: 0, patch: 0, delete: 0, unchanged: 0 };

  constructor(
    private readonly store: Store,
    private readonly onForeign: (name: string, owner: Owner) => void,
  ) {}

  /**
   * `again`: what to write after a conflict, made after the store is read
   * back (a union of clusters re-reads what it keeps of the others, so a
   * write it lost the race to is not undone).
   */
  async write(spec: ServiceSpec, again?: () => Promise<ServiceSpec>): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      const held = this.written.has(spec.name) ? this.written.get(spec.name) : await this.read(spec.name);
      if (held === null) return;
      if (attempt > 1 && again) spec = await again();
      try {
        await this.apply(spec, held);
        return;
      } catch (err) {
        this.written.delete(spec.name);
        if (!(err instanceof StoreConflict) || attempt >= ATTEMPTS) throw err;
      }
    }
  }

  async remove(name: string): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      const held = this.written.has(name) ? this.written.get(name) : await this.read(name);
      this.written.delete(name);
      if (!held) return;
      try {
        await this.store.delete(name, { ifRevision: held.revision });
        this.counts.delete++;
        return;
      } catch (err) {
        if (!(err instanceof StoreConflict) || attempt >= ATTEMPTS) throw err;
      }
    }
  }

  /** After the first full list: the services this source wrote before that Kubernetes no longer has. */
  async prune(current: ReadonlySet<string>): Promise<string[]> {
    const { services } = await this.store.list();
    const gone = services.filter((s) => s.owner === 'kube' && !current.has(s.spec.name)).map((s) => s.spec.name);
    for (const name of gone) await this.remove(name);
    return gone;
  }

  /** What the store holds, when the source owns it; null when the file or the API does. */
  private async read(name: string): Promise<Written | undefined | null> {
    const s = await this.store.get(name);
    if (!s) return undefined;
    if (s.owner !== 'kube') {
      if (this.foreign.get(name) !== s.owner) this.onForeign(name, s.owner);
      this.foreign.set(name, s.owner);
      return null;
    }
    this.foreign.delete(name);
    const endpoints = new Map(s.spec.endpoints.map((e) => [endpointKey(e), e]));
    const w: Written = { revision: s.revision, head: headKey(s.spec), endpoints };
    this.written.set(name, w);
    return w;
  }

  private async apply(spec: ServiceSpec, held: Written | undefined): Promise<void> {
    const head = headKey(spec);
    if (!held || held.head !== head) {
      const revision = await this.store.put(spec, { owner: 'kube', ifRevision: held?.revision ?? 0 });
      this.written.set(spec.name, {
        revision,
        head,
        endpoints: new Map(spec.endpoints.map((e) => [endpointKey(e), e])),
      });
      this.counts.put++;
      return;
    }
    const upserts: Endpoint[] = [];
    const keys = new Set<string>();
    for (const e of spec.endpoints) {
      const k = endpointKey(e);
      keys.add(k);
      const was = held.endpoints.get(k);
      if (!was || !sameEndpoint(was, e)) upserts.push(e);
    }
    const removals = [...held.endpoints.keys()].filter((k) => !keys.has(k));
    if (upserts.length === 0 && removals.length === 0) {
      this.counts.unchanged++;
      return;
    }
    const revision = await this.store.patchEndpoints(spec.name, upserts, removals, { ifRevision: held.revision });
    // Deleted underneath (an API DELETE): read again, which finds nothing, and PUT it back.
    if (revision === undefined) throw new StoreConflict(spec.name, held.revision, 0);
    for (const e of upserts) held.endpoints.set(endpointKey(e), e);
    for (const k of removals) held.endpoints.delete(k);
    held.revision = revision;
    this.counts.patch++;
  }
}

/** Everything of a service but its endpoints, in one canonical spelling. */
function headKey(spec: ServiceSpec): string {
  return JSON.stringify(serviceSpecToJson({ ...spec, endpoints: [] }));
}
