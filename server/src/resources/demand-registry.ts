/**
 * One DemandSet per node id, kept across the node's reconnects to this
 * replica (a reconnect to another replica starts from what the node declares;
 * sharing the sets through the store is left for later). Which nodes are
 * lazy: the node's `canopy.lazy` metadata (true/false) overrides the
 * mesh-wide switch. Declared services: `canopy.demand`, a list of service
 * names or one comma-separated string.
 */
import { DemandSet, type LazySettings } from '../domain/demand.js';
import type { NodeInfo } from '../wire/request.js';

export const LAZY_KEY = 'canopy.lazy';
export const DEMAND_KEY = 'canopy.demand';
/** Node ids remembered; the oldest is forgotten past this (a bound, not an expected size). */
const MAX_NODES = 100_000;

export class DemandRegistry {
  private readonly byNode = new Map<string, DemandSet>();

  constructor(private readonly settings: LazySettings) {}

  /** The node's demand set, or undefined when the node gets full LDS/CDS. */
  forNode(node: NodeInfo | undefined): DemandSet | undefined {
    if (!node || !lazyFor(node, this.settings)) return undefined;
    const declared = declaredOf(node);
    let set = this.byNode.get(node.id);
    if (set) {
      set.declare(declared);
      // Most recently seen last, so the first key is the one to forget.
      this.byNode.delete(node.id);
    } else set = new DemandSet(declared, this.settings.unusedTimeoutMs);
    this.byNode.set(node.id, set);
    if (this.byNode.size > MAX_NODES) this.byNode.delete(this.byNode.keys().next().value!);
    return set;
  }
}

function lazyFor(node: NodeInfo, settings: LazySettings): boolean {
  const v = node.metadata[LAZY_KEY];
  if (v === true || v === 'true') return true;
  if (v === false || v === 'false') return false;
  return settings.enabled;
}

function declaredOf(node: NodeInfo): string[] {
  const v = node.metadata[DEMAND_KEY];
  if (Array.isArray(v)) return v.filter((x): x is string => typeof x === 'string');
  if (typeof v === 'string')
    return v
      .split(',')
      .map((s) => s.trim())
      .filter((s) => s !== '');
  return [];
}
