/**
 * The endpoints an Envoy sidecar is told about although no new traffic may go
 * to them (draining, unhealthy), so it drains its connections to them
 * gracefully instead of dropping them. Canopy computes priorities and weights
 * from routable endpoints alone; these go in one extra priority after the
 * last, where they change nothing Envoy computes: that priority has no
 * healthy host, so it gets no load while any earlier priority has one, and
 * the earlier priorities' health and locality weights are as before. Only
 * localities the client's CLA already holds are included, so a strict CLA
 * stays in its locality. Pure.
 */
import type { Cla, ClaGroup } from './cla.js';
import { localityKey } from './locality.js';
import type { Endpoint } from './service.js';

/** `parked`: the service's endpoints that get no new traffic (ServiceState.parked). */
export function parkedGroups(cla: Cla, parkedEndpoints: Iterable<Endpoint>): ClaGroup[] {
  let parked: Endpoint[] | undefined;
  for (const e of parkedEndpoints) (parked ??= []).push(e);
  if (!parked) return [];
  let last = -1;
  const localities = new Set<string>();
  for (const g of cla.groups) {
    last = Math.max(last, g.priority);
    localities.add(localityKey(g.locality));
  }
  const byLocality = new Map<string, Endpoint[]>();
  for (const e of parked) {
    const key = localityKey(e.locality);
    if (!localities.has(key)) continue;
    let list = byLocality.get(key);
    if (!list) byLocality.set(key, (list = []));
    list.push(e);
  }
  return [...byLocality.values()].map((list) => ({
    locality: list[0]!.locality,
    priority: last + 1,
    weight: list.reduce((n, e) => n + e.weight, 0),
    endpoints: list,
  }));
}
