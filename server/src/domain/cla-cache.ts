/**
 * CLAs cached by locality: a client's CLA depends only on (service, its
 * generation, the plan key of the tree nodes it matched), so every client that
 * matches the same nodes shares one entry, and one encoding of it. The number
 * of entries per service is bounded by the tree, never by the client count.
 */
import { buildCla, type Cla } from './cla.js';
import type { Placement } from './locality.js';
import type { ServiceState } from './mesh.js';
import { planFor } from './priorities.js';

export interface ClaEntry {
  readonly service: string;
  readonly generation: number;
  readonly key: string;
  readonly cla: Cla;
  /** The encoded ClusterLoadAssignment, shared by every client of this entry. */
  readonly bytes: Uint8Array;
}

/** Encodes a CLA; expected to reuse the encoding of unchanged endpoints. */
export type ClaEncoder = (cla: Cla) => Uint8Array;

export interface ClaCacheStats {
  readonly hits: number;
  readonly misses: number;
  readonly entries: number;
}

interface ServiceEntries {
  generation: number;
  readonly byKey: Map<string, ClaEntry>;
}

export class ClaCache {
  private readonly services = new Map<string, ServiceEntries>();
  private hits = 0;
  private misses = 0;
  private entries = 0;

  constructor(private readonly encode: ClaEncoder) {}

  lookup(service: ServiceState, client: Placement): ClaEntry {
    const plan = planFor(service.tree, service.spec.loadBalancing, client);
    let forService = this.services.get(service.name);
    if (!forService) this.services.set(service.name, (forService = { generation: service.generation, byKey: new Map() }));
    if (forService.generation !== service.generation) {
      this.entries -= forService.byKey.size;
      forService.byKey.clear();
      forService.generation = service.generation;
    }
    const hit = forService.byKey.get(plan.key);
    if (hit) {
      this.hits++;
      return hit;
    }
    this.misses++;
    const cla = buildCla(service.name, service.tree, service.spec.loadBalancing, plan);
    const entry: ClaEntry = {
      service: service.name,
      generation: service.generation,
      key: plan.key,
      cla,
      bytes: this.encode(cla),
    };
    forService.byKey.set(plan.key, entry);
    this.entries++;
    return entry;
  }

  /** Drops a deleted service's entries. */
  forget(service: string): void {
    const s = this.services.get(service);
    if (!s) return;
    this.entries -= s.byKey.size;
    this.services.delete(service);
  }

  entriesFor(service: string): number {
    return this.services.get(service)?.byKey.size ?? 0;
  }

  stats(): ClaCacheStats {
    return { hits: this.hits, misses: this.misses, entries: this.entries };
  }
}
