/**
 * What a LEDS CLA is made of: the service's locality pieces, each one
 * endpoint collection (a tree leaf, split by locality where the leaf is
 * coarser than one), at a priority with a weight. Unlike the routable-only
 * CLA, the pieces are computed over every endpoint whatever its health (Envoy
 * applies health itself from each LbEndpoint), so a health flip leaves them
 * unchanged: the health-blind tree here changes only when endpoints are added
 * or removed or their place or weight changes. Pure.
 */
import { buildCla } from './cla.js';
import { localityKey, pathOf, scopeValue, type Locality, type Placement, type Scope } from './locality.js';
import { LocalityTree } from './locality-tree.js';
import type { ServiceState } from './mesh.js';
import { matchPlan, planKey, planOf, type PlanMatch } from './priorities.js';
import type { Endpoint } from './service.js';

/** A client's LEDS plan: the cache key now, the pieces on a miss, from the same match. */
export interface LedsPlan {
  readonly key: string;
  pieces(): LedsPiece[];
}

export interface LedsPiece {
  readonly locality: Locality;
  readonly priority: number;
  /** Sum of the piece's endpoint weights. */
  readonly weight: number;
  /** The collection's leaf path (see resources/endpoint/leds-names.ts). */
  readonly leaf: readonly string[];
  /**
   * The piece's endpoints as the tree holds them: their place and weight are
   * current, their health may not be (a health flip does not touch the tree).
   */
  readonly endpoints: readonly Endpoint[];
}

const LOCALITY_PARTS = ['region', 'zone', 'subzone'] as const;

/** An endpoint's collection leaf: its scope values, then its locality parts that are not scopes. */
export function leafPathOf(scopes: readonly Scope[], p: Placement): string[] {
  const out = scopes.map((s) => scopeValue(s, p));
  for (const part of LOCALITY_PARTS) if (!scopes.includes(part)) out.push(p.locality[part]);
  return out;
}

/** One service's health-blind tree, kept in step with the service by `sync`. */
export class LedsStructure {
  readonly tree: LocalityTree;
  private generation = -1;
  /** Bumped when the pieces of some client may have changed. */
  version = 0;
  private readonly held = new Map<string, { ep: Endpoint; sig: string }>();
  /** A leaf's path by its endpoint array (stable while the leaf is unchanged): one array per leaf, reused. */
  private readonly leafOfRun = new WeakMap<readonly Endpoint[], string[]>();

  constructor(readonly state: ServiceState) {
    this.tree = new LocalityTree(state.spec.loadBalancing.routingPreference);
  }

  /** Brings the tree up to the service; returns whether the structure changed. */
  sync(): boolean {
    const state = this.state;
    if (state.generation === this.generation) return false;
    this.generation = state.generation;
    const scopes = this.tree.scopes;
    let changed = false;
    for (const [key, ep] of state.endpoints) {
      const h = this.held.get(key);
      if (h?.ep === ep) continue;
      const sig = `${pathOf(scopes, ep).join('\u0000')}\u0001${localityKey(ep.locality)}\u0001${ep.weight}`;
      this.held.set(key, { ep, sig });
      if (h?.sig === sig) continue;
      this.tree.upsert(ep, key, h?.ep);
      changed = true;
    }
    for (const [key, h] of this.held) {
      if (state.endpoints.has(key)) continue;
      this.held.delete(key);
      this.tree.remove(key, h.ep);
      changed = true;
    }
    if (changed) this.version++;
    return changed;
  }

  /**
   * The client's plan: its key (equal keys, equal pieces, at one version) and its pieces, both from one
   * match of the tree; the pieces are built only when asked for (a cache miss).
   */
  planFor(client: Placement): LedsPlan {
    const match = matchPlan(this.tree, this.state.spec.loadBalancing, client);
    return { key: planKey(match), pieces: () => this.piecesOf(match) };
  }

  /** The client's pieces in priority order; within a priority, in tree order. */
  piecesFor(client: Placement): LedsPiece[] {
    return this.planFor(client).pieces();
  }

  private piecesOf(match: PlanMatch): LedsPiece[] {
    const lb = this.state.spec.loadBalancing;
    const cla = buildCla(this.state.name, this.tree, lb, planOf(match));
    const scopes = this.tree.scopes;
    const out: LedsPiece[] = [];
    for (const g of cla.groups) {
      const priority = g.priority;
      // The usual case: a group is one whole leaf, one piece.
      const only = g.runs?.length === 1 ? g.runs[0]! : undefined;
      if (only && only.length > 0) {
        // The group's weight is its one leaf's: the sum of the run's (integer) weights.
        out.push({ leaf: this.leafOf(only), locality: only[0]!.locality, weight: g.weight, priority, endpoints: only });
        continue;
      }
      // A run is one leaf; without runs (a leaf spanning localities), endpoints are split by collection.
      const runs = g.runs ?? [g.endpoints];
      const byLeaf = new Map<
        string | readonly string[],
        { leaf: readonly string[]; locality: Locality; weight: number; endpoints: Endpoint[] }
      >();
      for (const run of runs) {
        const wholeLeaf = g.runs !== undefined;
        for (const ep of wholeLeaf ? run.slice(0, 1) : run) {
          const leaf = wholeLeaf ? this.leafOf(run) : leafPathOf(scopes, ep);
          const k = wholeLeaf ? leaf : leaf.join('\u0000');
          let piece = byLeaf.get(k);
          if (!piece) byLeaf.set(k, (piece = { leaf, locality: ep.locality, weight: 0, endpoints: [] }));
          piece.weight += wholeLeaf ? run.reduce((n, e) => n + e.weight, 0) : ep.weight;
          if (wholeLeaf) piece.endpoints.push(...run);
          else piece.endpoints.push(ep);
        }
      }
      // Envoy keeps one weight per (priority, locality), the last entry's, and pools the
      // entries' hosts: so when a locality is several collections, each entry carries the
      // locality's whole weight, not its own share.
      const pieces = [...byLeaf.values()];
      for (const p of pieces) {
        out.push({
          leaf: p.leaf,
          locality: p.locality,
          weight: pieces.length > 1 ? g.weight : p.weight,
          priority,
          endpoints: p.endpoints,
        });
      }
    }
    return out;
  }

  /** A whole leaf's path by its (non-empty) endpoint array. */
  private leafOf(run: readonly Endpoint[]): readonly string[] {
    let leaf = this.leafOfRun.get(run);
    if (!leaf) this.leafOfRun.set(run, (leaf = leafPathOf(this.tree.scopes, run[0]!)));
    return leaf;
  }
}
