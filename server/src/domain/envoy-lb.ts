/**
 * Where a stock Envoy sends new requests, given what Canopy sends it of a service: its priorities'
 * health and load, panic, locality weights scaled by availability, and host weights, as Envoy 1.40's
 * load balancer computes them (source/common/upstream: LoadBalancerBase::recalculatePerPriorityState,
 * recalculatePerPriorityPanic, recalculateLoadInTotalPanic, isHostSetInPanic; HostSetImpl::
 * effectiveLocalityWeight), checked against a real Envoy by e2e/envoy-shares.test.ts. Pure.
 *
 * - `UNHEALTHY` counts as unhealthy. An EDS `DRAINING` host is excluded (in no health), but only if it
 *   was healthy before: Envoy rebuilds a priority's host lists only when a host's coarse health changes
 *   (BaseDynamicClusterImpl::updateDynamicHostList), so UNHEALTHY → DRAINING leaves it counted as
 *   unhealthy. Canopy therefore sends `UNHEALTHY` for every unserved endpoint a priority counts
 *   (`countedStatus`), and `DRAINING` only in the parked priority, which holds no healthy host.
 * - A priority's health: min(100, factor × healthy / hosts), integer percent. Loads: each priority in
 *   order takes min(left, health × 100 / min(100, Σ health)); what rounding leaves goes to the first
 *   priority with health. Σ health = 0: everything to priority 0.
 * - Panic (unless Σ health ≥ 100): under 50% of a priority's hosts healthy. A priority in panic
 *   spreads its load over all its hosts, healthy or not, excluded too (envoyproxy/envoy#46800), by host
 *   weight, ignoring localities; when every priority is in panic, load goes to priorities by host count.
 * - Otherwise a locality's weight is scaled by min(1, factor/100 × healthy / hosts) and a host's
 *   share of its locality is its weight among the locality's healthy hosts.
 */
import type { Cla } from './cla.js';
import { LedsStructure } from './leds-structure.js';
import { localityKey, type Placement } from './locality.js';
import type { ServiceState } from './mesh.js';
import { parkedGroups } from './parked-endpoints.js';
import { hasPolicy } from './policy.js';
import { endpointKey, type Endpoint, type Health } from './service.js';
import { unhealthyOf } from './upstream.js';

export type EnvoyHostHealth = 'healthy' | 'unhealthy' | 'excluded';

export interface EnvoyHost {
  readonly key: string;
  readonly health: EnvoyHostHealth;
  readonly weight: number;
}

export interface EnvoyLocality {
  readonly locality: string;
  readonly weight: number;
  readonly hosts: readonly EnvoyHost[];
}

/** Priority → its localities (one per locality: Envoy pools repeated entries and keeps the last weight). */
export type EnvoyHostSets = readonly (readonly EnvoyLocality[])[];

export interface EnvoyPriorityView {
  readonly priority: number;
  /** Its localities, `region/zone/subzone`: how its number is told from the gRPC CLA's (explain). */
  readonly localities: readonly string[];
  /** Hosts counted (not excluded) and of them healthy. */
  readonly hosts: number;
  readonly healthy: number;
  /** Percent, 0..100. */
  readonly health: number;
  readonly load: number;
  readonly panic: boolean;
}

export interface EnvoyShares {
  readonly priorities: readonly EnvoyPriorityView[];
  /** Share of new requests per endpoint key (0..1); hosts that get none are absent. */
  readonly shares: ReadonlyMap<string, number>;
}

const PANIC_THRESHOLD = 50;

/**
 * The EDS/LEDS health_status of an endpoint in a priority Envoy counts (`unhealthy: count`): HEALTHY
 * when it is served (healthy, or terminating with no healthy endpoint left), else UNHEALTHY, so
 * whether Envoy counts it never depends on what it was before (see above).
 */
export function countedStatus(health: Health, served: boolean): 'HEALTHY' | 'UNHEALTHY' {
  return health === 'healthy' || (served && health === 'terminating') ? 'HEALTHY' : 'UNHEALTHY';
}

export function envoyShares(sets: EnvoyHostSets, factor: number): EnvoyShares {
  const counted = sets.map((locs) => locs.flatMap((l) => l.hosts).filter((h) => h.health !== 'excluded'));
  const healthyCount = counted.map((hs) => hs.filter((h) => h.health === 'healthy').length);
  const health = counted.map((hs, p) =>
    hs.length === 0 ? 0 : Math.min(100, Math.floor((factor * healthyCount[p]!) / hs.length)),
  );
  const total = Math.min(
    100,
    health.reduce((a, b) => a + b, 0),
  );
  const panic = counted.map(
    (hs, p) => total < 100 && (hs.length === 0 || (100 * healthyCount[p]!) / hs.length < PANIC_THRESHOLD),
  );
  const load = priorityLoads(sets, health, total, panic);
  const shares = new Map<string, number>();
  const add = (key: string, x: number) => x > 0 && shares.set(key, (shares.get(key) ?? 0) + x);
  sets.forEach((locs, p) => {
    const l = load[p]! / 100;
    if (l === 0) return;
    if (panic[p]) {
      const all = locs.flatMap((x) => x.hosts);
      const sum = all.reduce((n, h) => n + h.weight, 0);
      for (const h of all) add(h.key, (l * h.weight) / sum);
      return;
    }
    const effective = locs.map((x) => {
      const hs = x.hosts.filter((h) => h.health !== 'excluded');
      const ok = hs.filter((h) => h.health === 'healthy').length;
      return hs.length === 0 ? 0 : x.weight * Math.min(1, ((factor / 100) * ok) / hs.length);
    });
    const sum = effective.reduce((a, b) => a + b, 0);
    locs.forEach((x, i) => {
      const ok = x.hosts.filter((h) => h.health === 'healthy');
      const wsum = ok.reduce((n, h) => n + h.weight, 0);
      if (sum > 0 && wsum > 0) for (const h of ok) add(h.key, (l * (effective[i]! / sum) * h.weight) / wsum);
    });
  });
  return {
    priorities: sets.map((locs, p) => ({
      priority: p,
      localities: locs.map((l) => l.locality.split('\u0000').join('/')),
      hosts: counted[p]!.length,
      healthy: healthyCount[p]!,
      health: health[p]!,
      load: load[p]!,
      panic: panic[p]!,
    })),
    shares,
  };
}

function priorityLoads(sets: EnvoyHostSets, health: number[], total: number, panic: boolean[]): number[] {
  const load = sets.map(() => 0);
  if (sets.length === 0) return load;
  if (panic.every(Boolean)) {
    // recalculateLoadInTotalPanic: by every host the priority holds.
    const sizes = sets.map((locs) => locs.reduce((n, l) => n + l.hosts.length, 0));
    const all = sizes.reduce((a, b) => a + b, 0);
    if (all === 0) return [100, ...load.slice(1)];
    let left = 100;
    sizes.forEach((n, p) => (left -= load[p] = Math.floor((100 * n) / all)));
    load[sizes.findIndex((n) => n > 0)]! += left;
    return load;
  }
  if (total === 0) return [100, ...load.slice(1)];
  let left = 100;
  health.forEach((h, p) => (left -= load[p] = Math.min(left, Math.floor((h * 100) / total))));
  load[health.findIndex((h) => h > 0)]! += left;
  return load;
}

/**
 * What an Envoy sidecar holds for `service` at `client` (resources/endpoint.ts decides the same): the
 * routable CLA while every endpoint is routable; else under `unhealthy: count` (no policy, not
 * load-aware) every endpoint in the priority the health-blind tree gives it, with its health; else the
 * routable CLA plus the parked endpoints in one priority after the last.
 */
export function envoyHostSets(service: ServiceState, client: Placement, cla: Cla): EnvoyHostSets {
  const parked = [...service.parked()];
  const groups: { priority: number; locality: string; weight: number; hosts: EnvoyHost[] }[] = [];
  type As = 'routable' | 'counted' | 'parked';
  const healthOf = (e: Endpoint, as: As): EnvoyHostHealth => {
    if (as === 'routable') return 'healthy';
    if (as === 'counted') return countedStatus(e.health, service.serves(e)) === 'HEALTHY' ? 'healthy' : 'unhealthy';
    return e.health === 'unhealthy' ? 'unhealthy' : 'excluded';
  };
  const put = (priority: number, locality: string, weight: number, eps: readonly Endpoint[], as: As) => {
    let g = groups.find((x) => x.priority === priority && x.locality === locality);
    if (!g) groups.push((g = { priority, locality, weight, hosts: [] }));
    g.weight = weight;
    for (const e of eps) {
      const now = service.endpoints.get(endpointKey(e)) ?? e;
      g.hosts.push({ key: endpointKey(e), health: healthOf(now, as), weight: now.weight });
    }
  };
  const spec = service.spec;
  if (parked.length > 0 && unhealthyOf(spec) === 'count' && !hasPolicy(spec.loadBalancing.policy) && !service.load) {
    const structure = new LedsStructure(service);
    structure.sync();
    for (const p of structure.piecesFor(client))
      put(p.priority, localityKey(p.locality), p.weight, p.endpoints, 'counted');
  } else {
    for (const g of cla.groups) put(g.priority, localityKey(g.locality), g.weight, g.endpoints, 'routable');
    for (const g of parkedGroups(cla, parked))
      put(g.priority, localityKey(g.locality), g.weight, g.endpoints, 'parked');
  }
  const out: EnvoyLocality[][] = [];
  for (const g of groups) (out[g.priority] ??= []).push({ locality: g.locality, weight: g.weight, hosts: g.hosts });
  return Array.from(out, (x) => x ?? []);
}
