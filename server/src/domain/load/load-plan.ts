/**
 * One interval of load-aware balancing for one service: capacities from the
 * tree (healthy endpoints × capacity × utilisation, none for a drained
 * locality), offered load grouped by the client tree node it comes from, the
 * waterfill, then damping against the last interval's shares. Pure: the
 * previous state comes in, the next goes out.
 */
import { dampShares, DEFAULT_DAMPING, DEFAULT_DRAIN, drained, sharesOf, type DampingOptions } from './load-damper.js';
import { isLoadAware, type LoadAware } from './load-aware-spec.js';
import type { ServiceLoad } from './load-cla.js';
import {
  spillTiers,
  spillWeights,
  waterfill,
  type SpillClient,
  type SpillLocality,
  type SpillResult,
} from './load-spill.js';
import type { OfferedAt } from './load-aggregate.js';
import { pathOf } from '../locality.js';
import type { TreeNode } from '../locality-tree.js';
import type { ServiceState } from '../mesh.js';
import { isRoutable } from '../service.js';

export interface LoadPlanState {
  readonly epoch: number;
  /** Client node id → leaf id → share of that node's load sent there. */
  readonly shares: ReadonlyMap<number, ReadonlyMap<number, number>>;
  /** Locality paths drained by the auto capacity drain. */
  readonly drained: ReadonlySet<string>;
  readonly load: ServiceLoad | undefined;
}

export const EMPTY_LOAD_PLAN: LoadPlanState = { epoch: 0, shares: new Map(), drained: new Set(), load: undefined };

/** One locality in an interval's plan. */
export interface PlannedLocality {
  readonly path: string;
  readonly healthy: number;
  readonly endpoints: number;
  readonly capacityRps: number;
  /** Load the interval placed here, from every client node. */
  readonly assignedRps: number;
  readonly drained: boolean;
}

/** What one interval saw and decided, for /debug views. */
export interface LoadPlanReport {
  readonly localities: readonly PlannedLocality[];
  readonly clientNodes: readonly {
    readonly path: string;
    readonly offeredRps: number;
    readonly unplacedRps: number;
    /** Locality path → weight in priority 0. */
    readonly weights: Readonly<Record<string, number>>;
    /** The share of this node's load its weights send past its nearest tier. */
    readonly spill: number;
  }[];
  /** Over every client node, weighted by offered load: the fraction sent past their nearest tier. */
  readonly spillFraction: number;
}

/** Priority 0's weights sum to about this. */
export const WEIGHT_SCALE = 1000;

export function planLoad(
  service: ServiceState,
  /** Sorted by path (offeredByPath): replicas summing the same load in the same order plan the same weights. */
  offered: readonly OfferedAt[],
  previous: LoadPlanState,
  damping: DampingOptions = DEFAULT_DAMPING,
): { state: LoadPlanState; changed: boolean; report: LoadPlanReport } {
  const la = service.spec.loadBalancing.loadAware;
  if (!isLoadAware(la) || service.tree.size === 0) {
    const changed = previous.load !== undefined;
    return {
      state: { ...EMPTY_LOAD_PLAN, epoch: previous.epoch + (changed ? 1 : 0) },
      changed,
      report: { localities: [], clientNodes: [], spillFraction: 0 },
    };
  }
  const tree = service.tree;
  const totals = endpointTotals(service);
  const leaves = tree.root.leaves(tree.levels);
  const pathOfLeaf = new Map<number, string>(leaves.map((l) => [l.id, l.path().join('/')]));
  const { localities, drainedNow } = leafCapacities(leaves, pathOfLeaf, totals, la, previous);
  const byNode = offeredByNode(service, offered);
  const clients: SpillClient[] = [...byNode.values()].map(({ node, rps }) => ({
    id: String(node.id),
    offered: rps,
    tiers: spillTiers(node, tree.levels, la.balancing, (l) => String(l.id)),
  }));
  const result = waterfill(localities, clients);
  const capacityOf = new Map(localities.map((l) => [l.id, l]));

  const shares = new Map<number, Map<number, number>>();
  const weights = new Map<number, Map<number, number>>();
  const clientNodes: LoadPlanReport['clientNodes'][number][] = [];
  let changed = previous.load === undefined && byNode.size > 0;
  for (const c of clients) {
    const id = Number(c.id);
    const { next, w, spill } = clientShares(c, result, capacityOf, previous.shares.get(id), damping);
    shares.set(id, next);
    weights.set(id, w);
    const was = previous.load?.weights.get(id);
    if (!was || !sameWeights(was, w)) changed = true;
    clientNodes.push({
      path: byNode.get(id)!.node.path().join('/'),
      offeredRps: c.offered,
      unplacedRps: result.unplaced.get(c.id) ?? 0,
      weights: Object.fromEntries([...w].map(([lid, v]) => [pathOfLeaf.get(lid) ?? String(lid), v])),
      spill,
    });
  }
  if (previous.load) for (const id of previous.load.weights.keys()) if (!weights.has(id)) changed = true;
  const epoch = previous.epoch + (changed ? 1 : 0);
  const load: ServiceLoad | undefined =
    weights.size > 0 ? (changed || !previous.load ? { epoch, weights } : previous.load) : undefined;
  const offeredTotal = clientNodes.reduce((t, n) => t + n.offeredRps, 0);
  const report: LoadPlanReport = {
    spillFraction: offeredTotal > 0 ? clientNodes.reduce((t, n) => t + n.offeredRps * n.spill, 0) / offeredTotal : 0,
    localities: leaves.map((leaf) => {
      const path = pathOfLeaf.get(leaf.id)!;
      const t = totals.get(path) ?? { all: leaf.count, healthy: leaf.count };
      return {
        path,
        healthy: t.healthy,
        endpoints: t.all,
        capacityRps: capacityOf.get(String(leaf.id))!.capacity,
        assignedRps: result.landed.get(String(leaf.id)) ?? 0,
        drained: drainedNow.has(path),
      };
    }),
    clientNodes,
  };
  return { state: { epoch, shares, drained: drainedNow, load }, changed, report };
}

type Totals = ReadonlyMap<string, { all: number; healthy: number }>;

/** Healthy and total endpoints per locality path: the tree holds only the healthy ones. */
function endpointTotals(service: ServiceState): Totals {
  const totals = new Map<string, { all: number; healthy: number }>();
  for (const e of service.endpoints.values()) {
    const k = pathOf(service.tree.scopes, e).join('/');
    const t = totals.get(k) ?? { all: 0, healthy: 0 };
    t.all++;
    if (isRoutable(e)) t.healthy++;
    totals.set(k, t);
  }
  return totals;
}

/** Each leaf locality's capacity: healthy endpoints × capacity × utilisation, none once drained. */
function leafCapacities(
  leaves: readonly TreeNode[],
  pathOfLeaf: ReadonlyMap<number, string>,
  totals: Totals,
  la: LoadAware,
  previous: LoadPlanState,
): { localities: SpillLocality[]; drainedNow: Set<string> } {
  const drainedNow = new Set<string>();
  const localities: SpillLocality[] = [];
  for (const leaf of leaves) {
    const path = pathOfLeaf.get(leaf.id)!;
    const t = totals.get(path) ?? { all: leaf.count, healthy: leaf.count };
    const fraction = t.all > 0 ? t.healthy / t.all : 0;
    const isDrained =
      la.drainBelow > 0 &&
      drained(fraction, previous.drained.has(path), { ...DEFAULT_DRAIN, threshold: la.drainBelow });
    if (isDrained) drainedNow.add(path);
    localities.push({
      id: String(leaf.id),
      capacity: isDrained ? 0 : leaf.count * la.capacityRps * la.utilizationTarget,
    });
  }
  return { localities, drainedNow };
}

/** Offered load by the client tree node it comes from. */
function offeredByNode(
  service: ServiceState,
  offered: readonly OfferedAt[],
): Map<number, { node: TreeNode; rps: number }> {
  const byNode = new Map<number, { node: TreeNode; rps: number }>();
  for (const o of offered) {
    const node = service.tree.match(o.path);
    const held = byNode.get(node.id);
    if (held) held.rps += o.rps;
    else byNode.set(node.id, { node, rps: o.rps });
  }
  return byNode;
}

/**
 * One client node's shares: the waterfill's target, damped against last interval's (`held`); its weights; and the
 * share its weights send past its nearest tier.
 */
function clientShares(
  c: SpillClient,
  result: SpillResult,
  capacityOf: ReadonlyMap<string, SpillLocality>,
  held: ReadonlyMap<number, number> | undefined,
  damping: DampingOptions,
): { next: Map<number, number>; w: Map<number, number>; spill: number } {
  const firstTier = (c.tiers[0] ?? []).map((lid) => capacityOf.get(lid)!).filter((l) => l.capacity > 0);
  const target = sharesOf(spillWeights(result.placed.get(c.id)!, firstTier, WEIGHT_SCALE));
  // A node seen for the first time starts from where it is without load awareness: its first tier.
  const before = held ? stringKeys(held) : sharesOf(spillWeights(new Map(), firstTier, WEIGHT_SCALE));
  const next = new Map<number, number>();
  for (const [lid, share] of dampShares(before, target, damping)) next.set(Number(lid), share);
  const w = new Map<number, number>();
  for (const [lid, share] of next) if (share > 0) w.set(lid, Math.max(1, Math.round(share * WEIGHT_SCALE)));
  const nearest = new Set(c.tiers[0] ?? []);
  let spill = 0;
  for (const [lid, share] of next) if (!nearest.has(String(lid))) spill += share;
  return { next, w, spill };
}

function stringKeys(m: ReadonlyMap<number, number>): Map<string, number> {
  return new Map([...m].map(([k, v]) => [String(k), v]));
}

function sameWeights(a: ReadonlyMap<number, number>, b: ReadonlyMap<number, number>): boolean {
  if (a.size !== b.size) return false;
  for (const [k, v] of a) if (b.get(k) !== v) return false;
  return true;
}
