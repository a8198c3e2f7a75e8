/**
 * Kubernetes topology hints: an EndpointSlice endpoint's `hints.forZones`
 * names the zones whose clients it serves (kube-proxy, KEP-2433), which may be
 * several and need not include its own. The importers carry them as one
 * endpoint label (the zones joined by commas); under trafficDistribution a
 * hinted endpoint matches a client of any zone it is hinted for instead of its
 * own (policy-cla.ts).
 */
import type { LocalityTree } from './locality-tree.js';
import type { Endpoint } from './service.js';

export const FOR_ZONES_LABEL = 'canopy.dev/for-zones';

/** The label value for an endpoint's hinted zones; none when the hints name only its own zone. */
export function forZonesLabel(zones: readonly string[], own: string): Record<string, string> | undefined {
  const names = [...new Set(zones.filter((z) => z !== ''))].sort();
  if (names.length === 0 || (names.length === 1 && names[0] === own)) return undefined;
  return { [FOR_ZONES_LABEL]: names.join(',') };
}

/** The zones an endpoint is hinted for, or undefined when it carries no hints (its own zone counts). */
export function hintedZones(e: Endpoint): readonly string[] | undefined {
  const v = Object.hasOwn(e.labels, FOR_ZONES_LABEL) ? e.labels[FOR_ZONES_LABEL] : undefined;
  return v === undefined ? undefined : v.split(',');
}

/** Whether an endpoint at `ownZone` serves a client in `clientZone`, by its hints where it has them. */
export function servesZone(e: Endpoint, ownZone: string, clientZone: string): boolean {
  const hinted = hintedZones(e);
  return hinted ? hinted.includes(clientZone) : ownZone === clientZone;
}

/** Every zone some endpoint of the tree is hinted for, until the tree changes (a cache hit stays cheap). */
const held = new WeakMap<LocalityTree, { readonly rev: number; readonly zones: ReadonlySet<string> }>();

export function zonesHintedIn(tree: LocalityTree): ReadonlySet<string> {
  const h = held.get(tree);
  if (h?.rev === tree.root.rev) return h.zones;
  const zones = new Set<string>();
  for (const leaf of tree.root.leaves(tree.levels))
    for (const e of leaf.orderedEndpoints()) for (const z of hintedZones(e) ?? []) zones.add(z);
  held.set(tree, { rev: tree.root.rev, zones });
  return zones;
}
