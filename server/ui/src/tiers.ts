/**
 * The explain view laid over the tree: each node's best priority tier and
 * its share of requests. A locality's share is split over its routed
 * endpoints by weight, so a node's share is the sum over the endpoints below
 * it, whatever scopes the tree is built from. A view too large to list its
 * endpoints is mapped by locality instead: a leaf takes the localities that
 * agree with its region, zone and subzone values.
 */
import type { Explain, ServiceView, ViewNode } from './api.js';

export interface NodeTier {
  /** The best (lowest) priority of an endpoint below this node; undefined when none is routed to. */
  readonly priority: number | undefined;
  /** Fraction of requests (0..1) sent to endpoints below this node. */
  readonly share: number;
}

export interface TierOverlay {
  readonly byPath: ReadonlyMap<string, NodeTier>;
  readonly matched: string;
  readonly priorities: readonly number[];
}

/** The same key the server gives an endpoint: address:port, IPv6 as [address]:port. */
export function endpointKey(address: string, port: number): string {
  return address.includes(':') ? `[${address}]:${port}` : `${address}:${port}`;
}

export function pathKey(path: readonly string[]): string {
  return path.map(encodeURIComponent).join('/');
}

function localityGroup(priority: number, l: { region: string; zone: string; subzone: string }): string {
  return `${priority}\u0000${l.region}\u0000${l.zone}\u0000${l.subzone}`;
}

type LeafTiers = (leaf: ViewNode) => NodeTier[];

export function tierOverlay(view: ServiceView, explain: Explain): TierOverlay {
  // Shares as given may be fractions or percentages: normalise so they sum to 1.
  const totalShare = explain.localities.reduce((s, l) => s + l.share, 0);
  const shareOf = new Map<string, number>();
  for (const l of explain.localities) {
    shareOf.set(localityGroup(l.priority, l.locality), totalShare > 0 ? l.share / totalShare : 0);
  }
  const leafTiers = view.endpointsListed ? byEndpoint(explain, shareOf) : byLocality(view, explain, shareOf);

  const byPath = new Map<string, NodeTier>();
  const visit = (n: ViewNode): NodeTier => {
    let priority: number | undefined;
    let share = 0;
    const take = (t: NodeTier) => {
      if (t.priority !== undefined && (priority === undefined || t.priority < priority)) priority = t.priority;
      share += t.share;
    };
    if (n.children.length === 0) for (const t of leafTiers(n)) take(t);
    for (const c of n.children) take(visit(c));
    const tier = { priority, share };
    byPath.set(pathKey(n.path), tier);
    return tier;
  };
  visit(view.root);
  const priorities = [...new Set(explain.localities.map((l) => l.priority))].sort((a, b) => a - b);
  return { byPath, matched: pathKey(explain.treeNode), priorities };
}

/** Exact: each routed endpoint's priority and its weight's part of its locality's share. */
function byEndpoint(explain: Explain, shareOf: ReadonlyMap<string, number>): LeafTiers {
  const groupWeight = new Map<string, number>();
  for (const e of explain.endpoints) {
    if (e.priority === null) continue;
    const g = localityGroup(e.priority, e.locality);
    groupWeight.set(g, (groupWeight.get(g) ?? 0) + e.weight);
  }
  const perEndpoint = new Map<string, { priority: number; share: number }>();
  for (const e of explain.endpoints) {
    if (e.priority === null) continue;
    const g = localityGroup(e.priority, e.locality);
    const w = groupWeight.get(g) ?? 0;
    perEndpoint.set(endpointKey(e.address, e.port), {
      priority: e.priority,
      share: w > 0 ? ((shareOf.get(g) ?? 0) * e.weight) / w : 0,
    });
  }
  return (leaf) => (leaf.endpoints ?? []).flatMap((e) => perEndpoint.get(e.key) ?? []);
}

/** Approximate: a locality's share split evenly over the leaves that agree with it. */
function byLocality(view: ServiceView, explain: Explain, shareOf: ReadonlyMap<string, number>): LeafTiers {
  const fields = view.scopes.map((s) => (s === 'region' || s === 'zone' || s === 'subzone' ? s : undefined));
  const agrees = (leaf: ViewNode, l: Explain['localities'][number]) =>
    fields.every((f, i) => f === undefined || l.locality[f] === leaf.path[i]);
  const leaves: ViewNode[] = [];
  const collect = (n: ViewNode) => (n.children.length === 0 ? leaves.push(n) : n.children.forEach(collect));
  collect(view.root);
  const matches = explain.localities.map((l) => leaves.filter((leaf) => agrees(leaf, l)).length);
  return (leaf) =>
    explain.localities.flatMap((l, i) =>
      agrees(leaf, l)
        ? [
            {
              priority: l.priority,
              share: (shareOf.get(localityGroup(l.priority, l.locality)) ?? 0) / (matches[i] ?? 1),
            },
          ]
        : [],
    );
}

/** The nodes to open so that every leaf of the best (lowest) priority shows: each such leaf's ancestors. */
export function branchesToBestTier(view: ServiceView, overlay: TierOverlay): Set<string> {
  const best = overlay.priorities[0];
  const open = new Set<string>();
  const visit = (n: ViewNode): void => {
    if (best === undefined || overlay.byPath.get(pathKey(n.path))?.priority !== best) return;
    if (n.children.length === 0) for (let i = 0; i < n.path.length; i++) open.add(pathKey(n.path.slice(0, i)));
    n.children.forEach(visit);
  };
  visit(view.root);
  return open;
}
