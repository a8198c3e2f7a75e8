/**
 * What Canopy is compared with, implemented faithfully and run on the same
 * data in the same process:
 *
 * - rankLoop: ztunnel's per-client loop. For every client, score every
 *   endpoint by the number of leading scopes it shares with the client, keep
 *   the best-scoring tier (FAILOVER), and build that client's CLA from it.
 * - istioPerClient: Istio's per-client priority computation without a cache.
 *   For every client, walk every locality group, give it a priority from how
 *   much of the client's locality it matches, then build and encode the CLA.
 */
import { type Cla, type ClaGroup } from '../server/src/domain/cla.js';
import { localityKey, pathOf, type Locality, type Placement, type Scope } from '../server/src/domain/locality.js';
import type { Endpoint } from '../server/src/domain/service.js';

export function rankLoop(
  scopes: readonly Scope[],
  endpoints: readonly Endpoint[],
  client: Placement,
  encode: (cla: Cla) => Uint8Array,
): Uint8Array {
  const want = pathOf(scopes, client);
  let best = -1;
  let selected: Endpoint[] = [];
  for (const ep of endpoints) {
    let rank = 0;
    for (let i = 0; i < scopes.length; i++) {
      const scope = scopes[i] as Scope;
      const v =
        scope === 'region'
          ? ep.locality.region
          : scope === 'zone'
            ? ep.locality.zone
            : scope === 'subzone'
              ? ep.locality.subzone
              : '';
      if (v !== want[i]) break;
      rank++;
    }
    if (rank > best) {
      best = rank;
      selected = [ep];
    } else if (rank === best) {
      selected.push(ep);
    }
  }
  return encode({ clusterName: 'svc', groups: group(selected, () => 0), overprovisioningFactor: 140 });
}

/** Endpoints grouped by locality, as Istio holds them (LocalityLbEndpoints). */
export function localityGroups(endpoints: readonly Endpoint[]): { locality: Locality; endpoints: Endpoint[] }[] {
  const m = new Map<string, { locality: Locality; endpoints: Endpoint[] }>();
  for (const ep of endpoints) {
    const k = localityKey(ep.locality);
    let g = m.get(k);
    if (!g) m.set(k, (g = { locality: ep.locality, endpoints: [] }));
    g.endpoints.push(ep);
  }
  return [...m.values()];
}

export function istioPerClient(
  groups: readonly { locality: Locality; endpoints: Endpoint[] }[],
  client: Placement,
  encode: (cla: Cla) => Uint8Array,
): Uint8Array {
  const c = client.locality;
  const raw = groups.map((g) => {
    const l = g.locality;
    const p = l.region !== c.region ? 3 : l.zone !== c.zone ? 2 : l.subzone !== c.subzone ? 1 : 0;
    return { g, p };
  });
  // Compact priorities so they run 0, 1, 2… (Istio does the same before sending).
  const used = [...new Set(raw.map((r) => r.p))].sort((a, b) => a - b);
  const out: ClaGroup[] = raw.map(({ g, p }) => ({
    locality: g.locality,
    priority: used.indexOf(p),
    weight: g.endpoints.reduce((s, e) => s + e.weight, 0),
    endpoints: g.endpoints,
  }));
  return encode({ clusterName: 'svc', groups: out, overprovisioningFactor: 140 });
}

function group(endpoints: readonly Endpoint[], priority: (e: Endpoint) => number): ClaGroup[] {
  const m = new Map<string, { locality: Locality; priority: number; weight: number; endpoints: Endpoint[] }>();
  for (const ep of endpoints) {
    const p = priority(ep);
    const k = `${localityKey(ep.locality)}\u0001${p}`;
    let g = m.get(k);
    if (!g) m.set(k, (g = { locality: ep.locality, priority: p, weight: 0, endpoints: [] }));
    g.weight += ep.weight;
    g.endpoints.push(ep);
  }
  return [...m.values()];
}
