/**
 * What an Envoy holds after EDS (and LEDS), read from a decoded ClusterLoadAssignment, as the host sets
 * server/src/domain/envoy-lb.ts computes shares over: one (priority, locality) pools the hosts of every
 * LocalityLbEndpoints naming it and keeps the last one's weight; HEALTHY and UNKNOWN hosts are healthy,
 * UNHEALTHY ones unhealthy, DRAINING ones excluded. Real Envoy checks the arithmetic
 * (e2e/envoy-shares.test.ts); this lets fast tests run it over the bytes Canopy encodes.
 */
import {
  envoyShares,
  type EnvoyHost,
  type EnvoyHostSets,
  type EnvoyLocality,
  type EnvoyShares,
} from '../../src/domain/envoy-lb.js';

type Obj = Record<string, unknown>;

function host(e: Obj): EnvoyHost {
  const sock = ((e['endpoint'] as Obj)['address'] as Obj)['socket_address'] as Obj;
  const status = String(e['health_status'] ?? 'UNKNOWN');
  return {
    key: `${String(sock['address'])}:${String(sock['port_value'])}`,
    health: status === 'HEALTHY' || status === 'UNKNOWN' ? 'healthy' : status === 'DRAINING' ? 'excluded' : 'unhealthy',
    weight: Number((e['load_balancing_weight'] as Obj | undefined)?.['value'] ?? 1),
  };
}

/** The CLA as Envoy holds it; `members` resolves a LEDS collection to its LbEndpoints. */
export function envoyHostSetsOf(cla: Obj, members: (collection: string) => Obj[]): EnvoyHostSets {
  const byPriority: Map<string, { locality: string; weight: number; hosts: EnvoyHost[] }>[] = [];
  for (const g of (cla['endpoints'] as Obj[] | undefined) ?? []) {
    const priority = Number(g['priority'] ?? 0);
    const l = (g['locality'] as Obj | undefined) ?? {};
    const loc = `${String(l['region'] ?? '')}/${String(l['zone'] ?? '')}/${String(l['sub_zone'] ?? '')}`;
    const leds = g['leds_cluster_locality_config'] as Obj | undefined;
    const eps = leds ? members(String(leds['leds_collection_name'])) : ((g['lb_endpoints'] as Obj[] | undefined) ?? []);
    const byLoc = (byPriority[priority] ??= new Map());
    let entry = byLoc.get(loc);
    if (!entry) byLoc.set(loc, (entry = { locality: loc, weight: 0, hosts: [] }));
    entry.weight = Number((g['load_balancing_weight'] as Obj | undefined)?.['value'] ?? 0);
    entry.hosts.push(...eps.map(host));
  }
  return Array.from(byPriority, (m): EnvoyLocality[] => (m ? [...m.values()] : []));
}

/** Envoy's split of a decoded full CLA (no LEDS), at the CLA's overprovisioning factor (140 when unset). */
export function claShares(cla: Obj): EnvoyShares {
  const factor = Number(
    ((cla['policy'] as Obj | undefined)?.['overprovisioning_factor'] as Obj | undefined)?.['value'] ?? 140,
  );
  return envoyShares(
    envoyHostSetsOf(cla, () => []),
    factor,
  );
}
