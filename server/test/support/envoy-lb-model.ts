/**
 * The share of new requests Envoy sends each endpoint of a decoded
 * ClusterLoadAssignment, computed the way Envoy documents it (priority
 * levels, overprovisioning factor, locality-weighted LB): a test peer's model
 * for checking that what Canopy sends an Envoy sidecar splits traffic as
 * intended. Health: UNKNOWN and HEALTHY hosts are healthy; DRAINING hosts are
 * excluded (they count neither as healthy nor in the total); other statuses
 * count in the total only. Panic mode is reported, not modelled.
 */
type Obj = Record<string, unknown>;

export interface EnvoyShares {
  /** `address:port` → fraction of new requests (0..1). */
  readonly shares: Map<string, number>;
  readonly panic: boolean;
}

const HEALTHY = new Set(['UNKNOWN', 'HEALTHY', undefined]);

export function envoyShares(cla: Obj, panicThreshold = 50): EnvoyShares {
  const of = Number(
    ((cla['policy'] as Obj | undefined)?.['overprovisioning_factor'] as Obj | undefined)?.['value'] ?? 140,
  );
  const groups = (cla['endpoints'] as Obj[] | undefined) ?? [];
  const byPriority = new Map<number, Obj[]>();
  for (const g of groups) {
    const p = Number(g['priority'] ?? 0);
    byPriority.set(p, [...(byPriority.get(p) ?? []), g]);
  }
  const priorities = [...byPriority.keys()].sort((a, b) => a - b);
  const count = (gs: Obj[], pick: (status: unknown) => boolean) =>
    gs.flatMap((g) => (g['lb_endpoints'] as Obj[] | undefined) ?? []).filter((e) => pick(e['health_status'])).length;
  const health = priorities.map((p) => {
    const gs = byPriority.get(p)!;
    const healthy = count(gs, (s) => HEALTHY.has(s as string));
    const total = count(gs, (s) => s !== 'DRAINING');
    return total === 0 ? 0 : Math.min(100, Math.floor((of * healthy) / total));
  });
  const normalized = Math.min(
    100,
    health.reduce((a, b) => a + b, 0),
  );
  const shares = new Map<string, number>();
  let left = 100;
  priorities.forEach((p, i) => {
    const load = normalized === 0 ? 0 : Math.min(left, Math.floor((health[i]! * 100) / normalized));
    left -= load;
    const gs = byPriority.get(p)!;
    const effective = gs.map((g) => {
      const eps = (g['lb_endpoints'] as Obj[] | undefined) ?? [];
      const healthy = eps.filter((e) => HEALTHY.has(e['health_status'] as string)).length;
      const total = eps.filter((e) => e['health_status'] !== 'DRAINING').length;
      const weight = Number((g['load_balancing_weight'] as Obj | undefined)?.['value'] ?? 0);
      return total === 0 ? 0 : weight * Math.min(1, (of / 100) * (healthy / total));
    });
    const sum = effective.reduce((a, b) => a + b, 0);
    gs.forEach((g, k) => {
      const eps = ((g['lb_endpoints'] as Obj[] | undefined) ?? []).filter((e) =>
        HEALTHY.has(e['health_status'] as string),
      );
      const w = (e: Obj) => Number((e['load_balancing_weight'] as Obj | undefined)?.['value'] ?? 1);
      const wsum = eps.reduce((a, e) => a + w(e), 0);
      for (const e of (g['lb_endpoints'] as Obj[] | undefined) ?? []) {
        const sock = ((e['endpoint'] as Obj)['address'] as Obj)['socket_address'] as Obj;
        const key = `${String(sock['address'])}:${String(sock['port_value'])}`;
        const healthy = HEALTHY.has(e['health_status'] as string);
        const share = !healthy || sum === 0 || wsum === 0 ? 0 : (load / 100) * (effective[k]! / sum) * (w(e) / wsum);
        shares.set(key, share);
      }
    });
  });
  return { shares, panic: normalized < panicThreshold };
}
