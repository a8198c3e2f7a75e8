/**
 * A client's CLA under a locality policy, with the reason for every
 * endpoint's place. Each endpoint gets a rank tuple
 *   (failoverPriority rank, tree tier, explicit-failover rank)
 * compared in that order and densely ranked, so priorities run 0..k with no
 * gap (gRPC NACKs gaps); weights come from the endpoints, the affinity tags
 * or the distribute rule, and are never 0 (gRPC skips weightless localities).
 *
 * The result depends on the client only through the tree node it matches and
 * the client attributes the policy reads, which is what `policyKey` puts in
 * the cache key: distinct CLAs stay bounded by tree nodes × values read. The
 * key and the CLA are both made from one `matchPolicy` of the tree.
 */
import type { Cla } from './cla.js';
import { scopeValue, type Locality, type Placement, type Scope } from './locality.js';
import type { LocalityTree, TreeNode } from './locality-tree.js';
import { acceptsValue, type LocalityPolicy, type PriorityLabel } from './policy.js';
import { distributeRuleFor, groupsOf, note, type Working } from './policy-groups.js';
import { ancestorAt, matchPlan, planKey, planOf, tierLeaves, type PlanMatch } from './priorities.js';
import type { Endpoint, LoadBalancing } from './service.js';
import { servesZone, zonesHintedIn } from './zone-hints.js';

/** One endpoint's place in a client's CLA, or why it has none. */
export interface EndpointVerdict {
  readonly endpoint: Endpoint;
  readonly priority: number | null;
  /** The locality group it is sent in (an affinity group has its own subzone). */
  readonly locality: Locality;
  /** The group's load_balancing_weight; 0 when left out. */
  readonly weight: number;
  readonly reason: string;
}

export interface PolicyOutcome {
  readonly key: string;
  readonly cla: Cla;
  /** Routable endpoints only, depth-first; the tree holds no others. */
  readonly verdicts: readonly EndpointVerdict[];
  /** The deepest tree node the client matched. */
  readonly matched: TreeNode;
}

/**
 * What a client's policy CLA depends on, found by one walk of the tree: the
 * key (`policyKey`, on every lookup) and the CLA (`policyOutcome`, on a
 * miss) are both made from it.
 */
export interface PolicyMatch {
  readonly tree: LocalityTree;
  readonly lb: LoadBalancing;
  readonly client: Placement;
  /** The deepest tree node the client matched. */
  readonly matched: TreeNode;
  /** The tree's own tiers, `reach` left to the final priorities (capToReach); none under trafficDistribution. */
  readonly plan?: PlanMatch;
}

export function matchPolicy(tree: LocalityTree, lb: LoadBalancing, client: Placement): PolicyMatch {
  const matched = tree.matchPlacement(client);
  if (lb.policy?.trafficDistribution) return { tree, lb, client, matched };
  return { tree, lb, client, matched, plan: matchPlan(tree, uncapped(lb), client, matched) };
}

/** The cache key: the tree part (as for a policy-free service) plus the client attributes the policy reads. */
export function policyKey(m: PolicyMatch): string {
  const { tree, lb, client, matched } = m;
  const p = lb.policy ?? {};
  // `reach` cuts the final priorities (capToReach), not the tree's tiers: the key needs no tier count, as a
  // policy CLA is rebuilt on every change of the service.
  const parts: string[] = [m.plan ? planKey(m.plan) : trafficKey(tree, client)];
  if (p.failover) {
    // The client's own first-level node, as the match reached it.
    const own = matched.depth >= 1 ? ancestorAt(matched, 1).id : '-';
    parts.push(`o${own}:${applicableRules(p, scopeValue(tree.scopes[0]!, client)).join(',')}`);
  }
  if (p.failoverPriority) parts.push(`p${JSON.stringify(clientPriorityValues(p.failoverPriority, client))}`);
  if (p.affinity) {
    const leaf = matched.depth === tree.levels ? matched.id : '-';
    parts.push(`a${leaf}:${JSON.stringify(p.affinity.map((a) => scopeValue(a.scope, client)))}`);
  }
  if (p.distribute) parts.push(`d${distributeRuleFor(p, client)}`);
  return parts.join('|');
}

/** One match, then the outcome (explain and the tests; the CLA cache goes through cla-planners.ts). */
export function resolvePolicy(
  name: string,
  tree: LocalityTree,
  lb: LoadBalancing,
  client: Placement,
  opts: { readonly reasons?: boolean } = {},
): PolicyOutcome {
  return policyOutcome(name, matchPolicy(tree, lb, client), opts);
}

/** With `reasons`, every verdict says why (explain); without, reasons are empty (the CLA cache). */
export function policyOutcome(name: string, m: PolicyMatch, opts: { readonly reasons?: boolean } = {}): PolicyOutcome {
  const { tree, lb, client, matched } = m;
  const p: LocalityPolicy = lb.policy ?? {};
  const key = policyKey(m);
  const work: Working[] = [];
  for (const leaf of tree.root.leaves(tree.levels)) {
    const path = leaf.path();
    for (const endpoint of leaf.orderedEndpoints()) {
      const w: Working = {
        endpoint,
        leaf,
        path,
        labelRank: 0,
        tier: 0,
        orderRank: 0,
        dropped: false,
        priority: 0,
        locality: endpoint.locality,
      };
      work.push(opts.reasons ? { ...w, reasons: [] } : w);
    }
  }
  if (m.plan) rankByTree(m.plan, client, work);
  else rankByTrafficDistribution(tree, p, client, work);
  if (p.failover) rankByFailoverOrder(tree, p, client, matched, work);
  if (p.failoverPriority) rankByLabels(p.failoverPriority, client, work);
  if (p.affinity) applyAffinity(tree, p, client, matched, work);
  const groups = groupsOf(work, p, client);
  if (lb.reach && lb.mode === 'failover') capToReach(groups, work, lb.reach.minEndpoints);
  const verdicts = work.map((w) => ({
    endpoint: w.endpoint,
    priority: w.dropped ? null : w.priority,
    locality: w.locality,
    weight: w.dropped ? 0 : (groups.weightOf.get(w) ?? 0),
    reason: w.reasons?.join('; ') ?? '',
  }));
  return {
    key,
    matched,
    verdicts,
    cla: { clusterName: name, groups: groups.list, overprovisioningFactor: lb.overprovisioningFactor },
  };
}

function uncapped(lb: LoadBalancing): LoadBalancing {
  if (!lb.reach) return lb;
  const { reach: _cap, ...rest } = lb;
  return rest;
}

/**
 * `reach` on the final priorities, as planFor applies it to the tree's tiers
 * (the same cut when there is no policy): priorities are kept, whole and in
 * order, until they hold `min` endpoints; the rest are left out.
 */
function capToReach(groups: ReturnType<typeof groupsOf>, work: Working[], min: number): void {
  const perPriority: number[] = [];
  for (const g of groups.list) perPriority[g.priority] = (perPriority[g.priority] ?? 0) + g.endpoints.length;
  let held = 0;
  let last = 0;
  while (last < perPriority.length - 1 && (held += perPriority[last] ?? 0) < min) last++;
  if (last >= perPriority.length - 1) return;
  const kept = perPriority.slice(0, last + 1).reduce((a, b) => a + b, 0);
  for (const w of work) {
    if (w.dropped || w.priority <= last) continue;
    w.dropped = true;
    note(w, () => `reach: left out, priorities 0-${last} already hold ${kept} endpoints (minEndpoints ${min})`);
  }
  const cut = groups.list.findIndex((g) => g.priority > last);
  groups.list.length = cut;
}

function scopeNames(scopes: readonly Scope[]): string {
  return scopes.join(', ');
}

function commonPrefix(a: readonly string[], b: readonly string[]): number {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  return i;
}

/** The tree's own tiers (the mode, routingPreference, network-first). */
function rankByTree(m: PlanMatch, client: Placement, work: Working[]): void {
  const { tree, lb } = m;
  const plan = planOf(m);
  const tierOf = new Map<TreeNode, number>();
  plan.tiers.forEach((tier, i) => {
    for (const leaf of tierLeaves(tree, tier)) tierOf.set(leaf, i);
  });
  const clientPath = tree.scopes.map((s) => scopeValue(s, client));
  for (const w of work) {
    const m = commonPrefix(w.path, clientPath);
    const tier = tierOf.get(w.leaf);
    if (tier === undefined) {
      w.dropped = true;
      note(w, () => `${lb.mode}: left out, differs from the client at ${tree.scopes[m] ?? 'a level'}`);
      continue;
    }
    w.tier = tier;
    if (lb.mode === 'random') note(w, () => 'mode random: locality not ranked');
    else if (m === 0) note(w, () => `tree tier ${tier}: different ${tree.scopes[0]} from the client`);
    else note(w, () => `tree tier ${tier}: same ${scopeNames(tree.scopes.slice(0, m))} as the client`);
  }
}

/** valuesByLevel per tree, until its shape (the set of nodes) changes: a cache hit stays cheap. */
const levelValues = new WeakMap<LocalityTree, { readonly shape: number; readonly values: Set<string>[] }>();

/** The values present at each tree level (index 0 = depth 1). */
function valuesByLevel(tree: LocalityTree): Set<string>[] {
  const held = levelValues.get(tree);
  if (held?.shape === tree.shape) return held.values;
  const values = collectLevelValues(tree);
  levelValues.set(tree, { shape: tree.shape, values });
  return values;
}

function collectLevelValues(tree: LocalityTree): Set<string>[] {
  const out = Array.from({ length: tree.levels }, () => new Set<string>());
  const visit = (n: TreeNode): void => {
    for (const c of n.orderedChildren()) {
      out[c.depth - 1]?.add(c.value);
      visit(c);
    }
  };
  visit(tree.root);
  return out;
}

/**
 * What a trafficDistribution CLA depends on: the client's value at each level
 * that applies, or "-" when no endpoint has it (all such clients get the
 * same CLA), so keys stay bounded by the tree's values.
 */
function trafficKey(tree: LocalityTree, client: Placement): string {
  const values = valuesByLevel(tree);
  return `t${JSON.stringify(
    tree.scopes.map((s, i) => {
      const v = scopeValue(s, client);
      if (values[i]!.has('')) return null;
      return values[i]!.has(v) || (s === 'zone' && zonesHintedIn(tree).has(v)) ? v : '-';
    }),
  )}`;
}

/**
 * Kubernetes trafficDistribution with kube-proxy's applicability rule: a
 * level counts only when every endpoint has a value there (kube-proxy: every
 * endpoint hinted), and each level on its own, so nodes without zones (bare
 * metal) still prefer the same node (KEP-3015). Tiers fall back node → zone →
 * region over the levels that count, where kube-proxy would go cluster-wide
 * as soon as this node or zone has no endpoint.
 */
function rankByTrafficDistribution(tree: LocalityTree, p: LocalityPolicy, client: Placement, work: Working[]): void {
  const values = valuesByLevel(tree);
  const applies = values.map((v) => !v.has(''));
  const used = tree.scopes.filter((_, i) => applies[i]);
  const skipped = tree.scopes.filter((_, i) => !applies[i]);
  const clientPath = tree.scopes.map((s) => scopeValue(s, client));
  const why = skipped.length
    ? ` (${skipped.join(', ')} ${skipped.length > 1 ? 'are' : 'is'} not set on every endpoint, so not used)`
    : '';
  for (const w of work) {
    const same: Scope[] = [];
    for (let i = 0; i < tree.levels; i++) {
      if (!applies[i]) continue;
      const zone = tree.scopes[i] === 'zone';
      if (zone ? !servesZone(w.endpoint, w.path[i]!, clientPath[i]!) : w.path[i] !== clientPath[i]) break;
      same.push(tree.scopes[i]!);
    }
    w.tier = used.length - same.length;
    note(w, () =>
      used.length === 0
        ? `${p.trafficDistribution}: no level is set on every endpoint, so every endpoint ranks the same${why}`
        : same.length === 0
          ? `${p.trafficDistribution}: different ${used[0]} from the client${why}`
          : `${p.trafficDistribution}: same ${scopeNames(same)} as the client${why}`,
    );
  }
}

function applicableRules(p: LocalityPolicy, clientValue: string): number[] {
  const out: number[] = [];
  p.failover?.rules.forEach((r, i) => {
    if (!r.from || r.from.includes(clientValue)) out.push(i);
  });
  return out;
}

/** Explicit order for endpoints outside the client's value at the first level. */
function rankByFailoverOrder(
  tree: LocalityTree,
  p: LocalityPolicy,
  client: Placement,
  matched: TreeNode,
  work: Working[],
): void {
  const order = p.failover!;
  const scope = tree.scopes[0]!;
  const clientValue = scopeValue(scope, client);
  const own = matched.depth >= 1 ? matched.path()[0] : undefined;
  const rules = applicableRules(p, clientValue);
  for (const w of work) {
    const value = w.path[0] ?? '';
    if (own !== undefined && value === own) continue;
    const i = rules.find((r) => acceptsValue(order.rules[r]!.to, value));
    if (i !== undefined) {
      w.orderRank = rules.indexOf(i);
      note(
        w,
        () => `failover rule ${i} (${order.rules[i]!.to.type}) takes ${scope} "${value}" at step ${rules.indexOf(i)}`,
      );
    } else if (order.unmatched === 'drop') {
      w.dropped = true;
      note(w, () => `left out: no failover rule that applies to ${scope} "${clientValue}" accepts ${scope} "${value}"`);
    } else {
      w.orderRank = rules.length;
      note(w, () => `no failover rule accepts ${scope} "${value}": after the failover targets`);
    }
  }
}

function clientPriorityValues(labels: readonly PriorityLabel[], client: Placement): (string | null)[] {
  return labels.map((l) => (l.value !== undefined ? null : scopeValue(l.scope, client)));
}

/**
 * Istio failoverPriority: p = n − (index of the first mismatch); a leading
 * `network` (without a value) mismatch adds n and the scan goes on, so other
 * networks rank by the remaining labels, below the client's own network.
 */
function rankByLabels(labels: readonly PriorityLabel[], client: Placement, work: Working[]): void {
  const n = labels.length;
  const wanted = labels.map((l) => l.value ?? scopeValue(l.scope, client));
  const networkFirst = labels[0]?.scope === 'network' && labels[0].value === undefined;
  for (const w of work) {
    let offset = 0;
    let j = 0;
    const matchedNames: string[] = [];
    for (; j < n; j++) {
      const l = labels[j]!;
      if (scopeValue(l.scope, w.endpoint) === wanted[j]) {
        matchedNames.push(l.value !== undefined ? `${l.scope}=${l.value}` : l.scope);
        continue;
      }
      if (j === 0 && networkFirst) {
        offset = n;
        continue;
      }
      break;
    }
    const matches = offset ? j - 1 : j;
    w.labelRank = offset ? n + (n - 1 - matches) : n - j;
    const miss = labels[j];
    note(
      w,
      () =>
        `failoverPriority rank ${w.labelRank}: matches ${matchedNames.length ? matchedNames.join(', ') : 'none'}` +
        (offset ? ' on another network' : '') +
        (miss ? `; differs at ${miss.value !== undefined ? `${miss.scope}=${miss.value}` : miss.scope}` : ''),
    );
  }
}

/** Kuma localZone.affinityTags: weights inside the client's own leaf, first matching tag wins. */
function applyAffinity(
  tree: LocalityTree,
  p: LocalityPolicy,
  client: Placement,
  matched: TreeNode,
  work: Working[],
): void {
  if (matched.depth !== tree.levels) return;
  const tags = p.affinity!;
  const wanted = tags.map((t) => scopeValue(t.scope, client));
  for (const w of work) {
    if (w.leaf !== matched || w.dropped) continue;
    // Kuma needs the tag on both sides: a client without the value (missing or "") matches nothing.
    const i = tags.findIndex((t, k) => wanted[k] !== '' && scopeValue(t.scope, w.endpoint) === wanted[k]);
    if (i < 0) {
      w.groupWeight = 1;
      note(w, () => 'local, no affinity tag matches: weight 1');
      continue;
    }
    const tag = tags[i]!;
    const label = `${tag.scope.startsWith('label:') ? tag.scope.slice('label:'.length) : tag.scope}=${wanted[i]}`;
    w.locality = { ...w.endpoint.locality, subzone: label };
    w.groupWeight = tag.weight;
    note(w, () => `affinity tag ${i} ${label}: weight ${tag.weight}`);
  }
}
