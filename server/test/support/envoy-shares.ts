/**
 * A test peer: the share of new requests a stock Envoy sends each host of a
 * decoded ClusterLoadAssignment, after EDS (and LEDS) have filled its host
 * sets, by its documented rules (arch overview "Priority levels",
 * "Locality weighted load balancing"; LoadBalancerBase::recalculatePerPriorityState
 * and EDS's per-locality host lists, source/common/upstream): a priority's
 * health is healthy / all hosts × overprovisioning factor, capped at 100;
 * priorities take load in order by health; within one, a locality's weight
 * is scaled by its availability; one (priority, locality) pools the hosts of
 * every LocalityLbEndpoints naming it and keeps the last one's weight.
 * Draining hosts either count as unhealthy or are excluded (Envoy versions differ).
 */
type Obj = Record<string, unknown>;
export type Draining = 'unhealthy' | 'excluded';

export interface Host {
  readonly key: string;
  readonly status: string;
  readonly weight: number;
}

/** What Envoy holds after EDS: priority → locality → (weight, hosts). */
export type EnvoyView = Map<number, Map<string, { weight: number; hosts: Host[] }>>;

export function host(e: Obj): Host {
  const sock = ((e['endpoint'] as Obj)['address'] as Obj)['socket_address'] as Obj;
  return {
    key: `${String(sock['address'])}:${String(sock['port_value'])}`,
    status: String(e['health_status'] ?? 'UNKNOWN'),
    weight: Number((e['load_balancing_weight'] as Obj | undefined)?.['value'] ?? 1),
  };
}

/** The CLA as Envoy holds it; `members` resolves a LEDS collection to its LbEndpoints. */
export function envoyView(cla: Obj, members: (collection: string) => Obj[]): EnvoyView {
  const view: EnvoyView = new Map();
  for (const g of (cla['endpoints'] as Obj[] | undefined) ?? []) {
    const priority = Number(g['priority'] ?? 0);
    const l = (g['locality'] as Obj | undefined) ?? {};
    const loc = `${String(l['region'] ?? '')}/${String(l['zone'] ?? '')}/${String(l['sub_zone'] ?? '')}`;
    const leds = g['leds_cluster_locality_config'] as Obj | undefined;
    const eps = leds ? members(String(leds['leds_collection_name'])) : ((g['lb_endpoints'] as Obj[] | undefined) ?? []);
    let byLoc = view.get(priority);
    if (!byLoc) view.set(priority, (byLoc = new Map()));
    let entry = byLoc.get(loc);
    if (!entry) byLoc.set(loc, (entry = { weight: 0, hosts: [] }));
    entry.weight = Number((g['load_balancing_weight'] as Obj | undefined)?.['value'] ?? 0);
    entry.hosts.push(...eps.map(host));
  }
  return view;
}

/** Envoy's shares of new requests per host (0..1), and which priorities are in panic. */
export function shares(
  view: EnvoyView,
  factor: number,
  draining: Draining,
): { shares: Map<string, number>; panic: boolean[] } {
  const healthy = (h: Host) => h.status === 'UNKNOWN' || h.status === 'HEALTHY';
  const counted = (h: Host) => draining === 'unhealthy' || h.status !== 'DRAINING';
  const priorities = [...view.keys()].sort((a, b) => a - b);
  const health = priorities.map((p) => {
    const hosts = [...view.get(p)!.values()].flatMap((l) => l.hosts).filter(counted);
    return hosts.length === 0 ? 0 : Math.min(100, Math.floor((factor * hosts.filter(healthy).length) / hosts.length));
  });
  const total = Math.min(
    100,
    health.reduce((a, b) => a + b, 0),
  );
  const panic = priorities.map((p, i) => total < 100 && health[i]! * 100 < 50 * factor);
  const out = new Map<string, number>();
  let left = 100;
  priorities.forEach((p, i) => {
    const load = total === 0 ? 0 : Math.min(left, Math.floor((health[i]! * 100) / total));
    left -= load;
    const locs = [...view.get(p)!.values()];
    const effective = locs.map((l) => {
      const hosts = l.hosts.filter(counted);
      return hosts.length === 0
        ? 0
        : l.weight * Math.min(1, ((factor / 100) * hosts.filter(healthy).length) / hosts.length);
    });
    const sum = effective.reduce((a, b) => a + b, 0);
    locs.forEach((l, k) => {
      const wsum = l.hosts.filter(healthy).reduce((a, h) => a + h.weight, 0);
      for (const h of l.hosts) {
        const share =
          !healthy(h) || sum === 0 || wsum === 0 ? 0 : (load / 100) * (effective[k]! / sum) * (h.weight / wsum);
        out.set(h.key, (out.get(h.key) ?? 0) + share);
      }
    });
  });
  return { shares: out, panic };
}
