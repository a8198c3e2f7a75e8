/**
 * CLAs cached by locality: a client's CLA depends only on (service, the plan
 * key of the tree nodes it matched, and those nodes' content), so every client that
 * matches the same nodes shares one entry, and one encoding of it. The number
 * of entries per service is bounded by the tree, never by the client count.
 * With an encoder whose output follows the tree (the codec's ropes), entries
 * also outlive endpoint changes: only a change of the tree's shape drops them.
 */
import type { Cla } from './cla.js';
import { planCla } from './cla-planners.js';
import type { Placement } from './locality.js';
import type { ServiceState } from './mesh.js';

export interface ClaEntry<B = Uint8Array> {
  readonly service: string;
  /** The service generation the entry was last checked against. */
  generation: number;
  readonly key: string;
  readonly cla: Cla;
  /** The encoded ClusterLoadAssignment, shared by every client of this entry. */
  readonly bytes: B;
}

/** Encodes a CLA; expected to reuse the encoding of unchanged endpoints. */
export type ClaEncoder<B = Uint8Array> = (cla: Cla) => B;

export interface ClaCacheOptions {
  /**
   * The encoder's output for a CLA with `spans` follows the tree (it reads the
   * spans' nodes when it is read, as the codec's ropes do). Such entries are
   * kept across endpoint changes while the tree's shape is unchanged, so one
   * endpoint change rebuilds no entry; other entries are dropped on any change.
   */
  readonly liveSpans?: boolean;
}

export interface ClaCacheStats {
  readonly hits: number;
  readonly misses: number;
  readonly entries: number;
  /** Entries carried over a service change instead of being rebuilt. */
  readonly kept: number;
}

interface ServiceEntries<B> {
  tree: ServiceState['tree'];
  generation: number;
  shape: number;
  readonly byKey: Map<string, ClaEntry<B>>;
}

export class ClaCache<B extends { readonly length: number } = Uint8Array> {
  private readonly services = new Map<string, ServiceEntries<B>>();
  private hits = 0;
  private misses = 0;
  private entries = 0;
  private kept = 0;
  private readonly liveSpans: boolean;

  constructor(
    private readonly encode: ClaEncoder<B>,
    options: ClaCacheOptions = {},
  ) {
    this.liveSpans = options.liveSpans ?? false;
  }

  /**
   * The key a client's entry is cached under: clients with equal keys get the same entry. Pure (no entry
   * made, no count moved): the push orders streams by it.
   */
  keyFor(service: ServiceState, client: Placement): string {
    return planCla(service, client).key;
  }

  lookup(service: ServiceState, client: Placement): ClaEntry<B> {
    // The key and the CLA come from one planner's answer (cla-planners.ts).
    const plan = planCla(service, client);
    const key = plan.key;
    const forService = this.current(service);
    const hit = forService.byKey.get(key);
    if (hit) {
      this.hits++;
      return hit;
    }
    this.misses++;
    const cla = plan.cla();
    const entry: ClaEntry<B> = {
      service: service.name,
      generation: service.generation,
      key,
      cla,
      bytes: this.encode(cla),
    };
    forService.byKey.set(key, entry);
    this.entries++;
    return entry;
  }

  /** The service's entries, brought up to its generation: kept where they follow the tree, dropped otherwise. */
  private current(service: ServiceState): ServiceEntries<B> {
    const tree = service.tree;
    let held = this.services.get(service.name);
    if (!held) {
      held = { tree, generation: service.generation, shape: tree.shape, byKey: new Map() };
      this.services.set(service.name, held);
      return held;
    }
    if (held.generation === service.generation && held.tree === tree) return held;
    if (held.tree !== tree || held.shape !== tree.shape || !this.liveSpans) {
      this.entries -= held.byKey.size;
      held.byKey.clear();
    } else {
      for (const [k, e] of held.byKey) {
        if (e.cla.spans) {
          e.generation = service.generation;
          this.kept++;
        } else {
          held.byKey.delete(k);
          this.entries--;
        }
      }
    }
    held.tree = tree;
    held.shape = tree.shape;
    held.generation = service.generation;
    return held;
  }

  /** Every entry of a service as of its current generation (benchmarks and debug views). */
  entriesOf(service: ServiceState): ClaEntry<B>[] {
    return [...this.current(service).byKey.values()];
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
    return { hits: this.hits, misses: this.misses, entries: this.entries, kept: this.kept };
  }
}
