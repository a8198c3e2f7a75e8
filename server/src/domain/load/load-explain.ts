/**
 * Why a client node of a load-aware service gets its weights: per locality,
 * the load reported landing there and the load the last interval assigned it
 * against its capacity, the share of this node's load it takes, and a
 * sentence saying why ("r1/za/s full: 60 of 60 rps; 48% of this node's load
 * goes to r1/zb/s, the nearest with room"). Pure: the last interval's plan
 * report comes in.
 */
import { isLoadAware } from './load-aware-spec.js';
import type { LoadPlanReport, PlannedLocality } from './load-plan.js';
import { spillTiers } from './load-spill.js';
import type { Placement } from '../locality.js';
import type { ServiceState } from '../mesh.js';

/** What the load controller reports of one service's last interval. */
export type LoadReportInput = LoadPlanReport & {
  readonly at: number;
  readonly intervalMs: number;
  readonly landedRps: Readonly<Record<string, number>>;
  readonly shared?: { readonly replicas: readonly { readonly replica: string; readonly offeredRps: number }[] };
};

export interface LoadLocalityExplain extends Omit<PlannedLocality, 'path'> {
  readonly locality: string;
  /** 0: the client node's nearest localities; 1 the next, and so on. */
  readonly tier: number;
  /** Load clients report landing here (smoothed), from every client node. */
  readonly reportedRps: number;
  /** This client node's weight in priority 0 (0: none). */
  readonly weight: number;
  /** The share of this client node's load its weights send here. */
  readonly share: number;
  readonly why: string;
}

export interface LoadExplain {
  readonly balancing: string;
  readonly capacityRpsPerEndpoint: number;
  readonly utilizationTarget: number;
  readonly drainBelow: number;
  readonly intervalMs: number;
  /** When the last interval was planned (wall-clock ms); absent before the first. */
  readonly plannedAt?: number;
  /** The client tree node the weights are kept for. */
  readonly clientNode: string;
  /** This node's offered load (every client there, across replicas). */
  readonly offeredRps: number;
  readonly unplacedRps: number;
  /** The share of this node's load sent past its nearest tier. */
  readonly spill: number;
  /** Whether this node's CLA carries load weights (it reported load); otherwise it gets the plain failover CLA. */
  readonly weighted: boolean;
  readonly summary: readonly string[];
  readonly localities: readonly LoadLocalityExplain[];
  /** With replicas on etcd: the offered load each replica's clients report. */
  readonly replicas?: readonly { readonly replica: string; readonly offeredRps: number }[];
}

/** Undefined when the service is not load-aware. */
export function explainLoad(
  service: ServiceState,
  client: Placement,
  report: LoadReportInput | undefined,
): LoadExplain | undefined {
  const la = service.spec.loadBalancing.loadAware;
  if (!isLoadAware(la)) return undefined;
  const tree = service.tree;
  const node = tree.matchPlacement(client);
  const nodePath = node.path().join('/');
  const tierOf = new Map<string, number>();
  spillTiers(node, tree.levels, la.balancing, (l) => l.path().join('/')).forEach((tier, k) =>
    tier.forEach((p) => tierOf.set(p, k)),
  );
  const mine = report?.clientNodes.find((n) => n.path === nodePath);
  const weights = mine?.weights ?? {};
  const weightSum = Object.values(weights).reduce((a, b) => a + b, 0);
  const full = (l: { capacityRps: number; assignedRps: number }) =>
    l.capacityRps > 0 && l.assignedRps >= l.capacityRps * 0.999;
  const rows = (report?.localities ?? [])
    .map((l) => ({ ...l, tier: tierOf.get(l.path) ?? Infinity }))
    .sort((a, b) => a.tier - b.tier || (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  /** Every locality nearer than tier `t` is full or drained: the spill past them is needed. */
  const nearerFull = (t: number) => rows.every((r) => r.tier >= t || r.drained || full(r) || r.capacityRps === 0);
  const localities: LoadLocalityExplain[] = rows.map((l) => {
    const weight = weights[l.path] ?? 0;
    const share = weightSum > 0 ? weight / weightSum : 0;
    const load = `${rps(l.assignedRps)} of ${rps(l.capacityRps)} rps`;
    let why: string;
    if (l.drained)
      why = `${l.path} drained: ${l.healthy} of ${l.endpoints} healthy, below ${pct(la.drainBelow)}; no new traffic until above ${pct(la.drainBelow + 0.1)}`;
    else if (l.capacityRps === 0) why = `${l.path} has no capacity (no healthy endpoint)`;
    else if (share > 0 && l.tier === 0)
      why = `${l.path} ${full(l) ? 'full' : 'has room'}: ${load}; keeps ${pct(share)} of this node's load (its nearest)`;
    else if (share > 0)
      why = nearerFull(l.tier)
        ? `${pct(share)} of this node's load goes to ${l.path}, the nearest with room (${load})`
        : `${l.path} still takes ${pct(share)} of this node's load: a spill no longer needed drains back gradually (${load})`;
    else if (full(l)) why = `${l.path} full: ${load}, from other client nodes`;
    else if (l.tier === 0) why = `${l.path}: ${load}; none of this node's load`;
    else why = `${l.path}: not needed while nearer localities have room (${load})`;
    return {
      locality: l.path,
      tier: Number.isFinite(l.tier) ? l.tier : -1,
      healthy: l.healthy,
      endpoints: l.endpoints,
      capacityRps: l.capacityRps,
      assignedRps: l.assignedRps,
      reportedRps: report?.landedRps[l.path] ?? 0,
      drained: l.drained,
      weight,
      share,
      why,
    };
  });
  return {
    balancing: la.balancing,
    capacityRpsPerEndpoint: la.capacityRps,
    utilizationTarget: la.utilizationTarget,
    drainBelow: la.drainBelow,
    intervalMs: report?.intervalMs ?? 0,
    ...(report ? { plannedAt: report.at } : {}),
    clientNode: nodePath,
    offeredRps: mine?.offeredRps ?? 0,
    unplacedRps: mine?.unplacedRps ?? 0,
    spill: mine?.spill ?? 0,
    weighted: weightSum > 0,
    summary: summary(report, nodePath, mine, localities),
    localities,
    ...(report?.shared ? { replicas: report.shared.replicas } : {}),
  };
}

function summary(
  report: LoadReportInput | undefined,
  nodePath: string,
  mine: LoadPlanReport['clientNodes'][number] | undefined,
  localities: readonly LoadLocalityExplain[],
): string[] {
  const where = nodePath || '(the root)';
  if (!report) return ['no interval planned yet: weights are computed once every report interval'];
  const out: string[] = [];
  if (!mine) out.push(`no load reported from clients at ${where}: they get the plain failover CLA`);
  else {
    const nearest = localities.filter((l) => l.tier === 0 && !l.drained);
    const spillTo = localities.filter((l) => l.tier > 0 && l.share > 0);
    const fullNearest = nearest.filter((l) => l.capacityRps > 0 && l.assignedRps >= l.capacityRps * 0.999);
    const sum = (ls: readonly LoadLocalityExplain[], f: (l: LoadLocalityExplain) => number) =>
      ls.reduce((s, l) => s + f(l), 0);
    const names = (ls: readonly LoadLocalityExplain[]) => ls.map((l) => l.locality).join(', ');
    if (spillTo.length === 0)
      out.push(
        `all of this node's load (${rps(mine.offeredRps)} rps) stays in ${names(nearest.filter((l) => l.share > 0)) || 'its nearest localities'}: ${rps(sum(nearest, (l) => l.assignedRps))} of ${rps(sum(nearest, (l) => l.capacityRps))} rps`,
      );
    else if (fullNearest.length > 0 && fullNearest.length === nearest.length)
      out.push(
        `${names(fullNearest)} full: ${rps(sum(fullNearest, (l) => l.assignedRps))} of ${rps(sum(fullNearest, (l) => l.capacityRps))} rps; ${pct(mine.spill)} of this node's load goes to ${names(spillTo)}, the nearest with room`,
      );
    else
      out.push(
        `${pct(mine.spill)} of this node's load goes past its nearest localities, to ${names(spillTo)}${nearest.length === 0 ? ' (its nearest are drained)' : ': the spill drains back gradually'}`,
      );
    if (mine.unplacedRps > 0)
      out.push(`${rps(mine.unplacedRps)} rps of this node's load find no capacity anywhere: the service is overloaded`);
  }
  for (const l of localities) if (l.drained) out.push(l.why);
  return out;
}

function rps(x: number): string {
  return x >= 10 || x === 0 ? String(Math.round(x)) : x.toFixed(1);
}

function pct(x: number): string {
  return `${Math.round(x * 100)}%`;
}
