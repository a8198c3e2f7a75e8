/**
 * The groups of a client's CLA under a locality policy: endpoints densely
 * ranked into priorities, grouped by locality, weighted by their endpoints,
 * affinity tags or Istio's distribute rule, with the reason for each weight.
 */
import type { ClaGroup } from './cla.js';
import { formatLocality, localityKey, type Locality, type Placement } from './locality.js';
import type { TreeNode } from './locality-tree.js';
import { localityMatches, type LocalityPolicy } from './policy.js';
import type { Endpoint } from './service.js';

/** One endpoint while its place in the CLA is being worked out. */
export interface Working {
  readonly endpoint: Endpoint;
  readonly leaf: TreeNode;
  /** The leaf's path (its values at each level). */
  readonly path: readonly string[];
  /** The rank tuple: failoverPriority rank, tree tier, failover-order rank. */
  labelRank: number;
  tier: number;
  orderRank: number;
  /** Only when explaining: building reasons on the serving path would cost more than the CLA. */
  readonly reasons?: string[];
  dropped: boolean;
  priority: number;
  locality: Locality;
  /** Set by affinity: the group's fixed weight. */
  groupWeight?: number;
}

export function note(w: Working, text: () => string): void {
  w.reasons?.push(text());
}

export function distributeRuleFor(p: LocalityPolicy, client: Placement): number {
  const path = [client.locality.region, client.locality.zone, client.locality.subzone];
  return p.distribute?.findIndex((d) => localityMatches(path, d.from)) ?? -1;
}

interface Groups {
  readonly list: ClaGroup[];
  readonly weightOf: Map<Working, number>;
}

export function groupsOf(work: Working[], p: LocalityPolicy, client: Placement): Groups {
  // Dense rank of the rank tuples: no gaps.
  const live = work.filter((w) => !w.dropped);
  const tuples = [...new Set(live.map(rankKey))].sort((a, b) => a - b);
  const dense = new Map(tuples.map((t, i) => [t, i]));
  // Per priority, groups by locality key: no per-endpoint string is built.
  const byPriority: Map<string, Group>[] = tuples.map(() => new Map());
  let groups: Group[] = [];
  for (const w of live) {
    const priority = dense.get(rankKey(w))!;
    const k = keyOf(w.locality);
    const at = byPriority[priority]!;
    let g = at.get(k);
    if (!g) {
      at.set(k, (g = { locality: w.locality, priority, members: [], weight: 0 }));
      groups.push(g);
    }
    g.members.push(w);
    g.weight = w.groupWeight ?? g.weight + w.endpoint.weight;
  }
  const rule = p.distribute ? p.distribute[distributeRuleFor(p, client)] : undefined;
  if (rule) groups = distribute(groups, rule, p.distribute!.indexOf(rule));
  // Dropping may empty a priority: rank again so none is skipped.
  const left = [...new Set(groups.map((g) => g.priority))].sort((a, b) => a - b);
  for (const g of groups) {
    g.priority = left.indexOf(g.priority);
    for (const m of g.members) m.priority = g.priority;
  }
  groups.sort((a, b) => a.priority - b.priority);
  const weightOf = new Map<Working, number>();
  const list: ClaGroup[] = groups.map((g) => {
    for (const m of g.members) weightOf.set(m, g.weight);
    return {
      locality: g.locality,
      priority: g.priority,
      weight: g.weight,
      endpoints: g.members.map((m) => m.endpoint),
    };
  });
  return { list, weightOf };
}

/** localityKey, kept per locality object: endpoints (and their localities) outlive many CLA builds. */
const localityKeys = new WeakMap<Locality, string>();
function keyOf(l: Locality): string {
  let k = localityKeys.get(l);
  if (k === undefined) localityKeys.set(l, (k = localityKey(l)));
  return k;
}

/** The rank tuple as one number; each part stays below 2^12 (at most 8 labels, 8 levels, 1,000 rules). */
function rankKey(w: Working): number {
  return (w.labelRank * 4096 + w.tier) * 4096 + w.orderRank;
}

type Group = { locality: Locality; priority: number; members: Working[]; weight: number };

/** Istio distribute: each `to` pattern claims the unclaimed localities it matches and shares its weight among them. */
function distribute(groups: Group[], rule: NonNullable<LocalityPolicy['distribute']>[number], index: number): Group[] {
  const claimed = new Map<Group, number>();
  for (const [t, target] of rule.to.entries()) {
    const mine = groups.filter(
      (g) =>
        !claimed.has(g) && localityMatches([g.locality.region, g.locality.zone, g.locality.subzone], target.pattern),
    );
    const total = mine.reduce((s, g) => s + g.weight, 0);
    for (const g of mine) {
      claimed.set(g, t);
      const share = Math.max(1, Math.ceil((g.weight * target.weight) / total));
      for (const m of g.members)
        note(
          m,
          () =>
            `distribute rule ${index}: "${target.pattern}" claims ${formatLocality(g.locality)}, weight ${share} of ${target.weight}`,
        );
      g.weight = share;
    }
  }
  for (const g of groups) {
    if (claimed.has(g)) continue;
    for (const m of g.members) {
      m.dropped = true;
      note(
        m,
        () =>
          `left out: distribute rule ${index} (from "${rule.from}") claims no pattern for ${formatLocality(g.locality)}`,
      );
    }
  }
  return groups.filter((g) => claimed.has(g));
}
