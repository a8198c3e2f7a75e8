/**
 * What the go-control-plane peer is told besides the config file: each client locality's assignment,
 * worked out here by Canopy's own domain code (the locality tree and its CLA cache) from the same
 * fixture. It is data only: groups of endpoint keys by locality and priority, which groups each CLA
 * holds, and which CLA each client locality gets. The peer builds the protos, applies health changes
 * to them, serialises, versions and sends them itself; the bench then checks that both servers' CLAs
 * decode to the same assignment.
 */
import { writeFileSync } from 'node:fs';
import type { Placement } from '../server/src/domain/locality.js';
import { Mesh, type ServiceState } from '../server/src/domain/mesh.js';
import { endpointKey, type Endpoint, type ServiceSpec } from '../server/src/domain/service.js';
import { serverClaCache } from '../server/src/resources/endpoint/endpoint.js';

export interface PeerPlan {
  readonly service: string;
  readonly overprovisioningFactor: number;
  readonly groups: {
    priority: number;
    locality: { region: string; zone: string; subzone: string };
    endpoints: string[];
  }[];
  readonly clas: number[][];
  /** "region|zone|subzone" → index into clas. */
  readonly clients: Record<string, number>;
}

export const localityKey = (p: Placement): string => `${p.locality.region}|${p.locality.zone}|${p.locality.subzone}`;

/** The plan for these client placements, from a spec whose endpoints are all healthy (the bench's start). */
export function peerPlan(spec: ServiceSpec, clients: readonly Placement[]): PeerPlan {
  if (spec.endpoints.some((e) => e.health !== 'healthy')) {
    throw new Error('peer plan: the fixture must start with every endpoint healthy (the plan lists them all)');
  }
  const mesh = new Mesh();
  mesh.put(spec);
  const state = mesh.get(spec.name) as ServiceState;
  const cache = serverClaCache();
  const groups: PeerPlan['groups'] = [];
  // A group is one locality's endpoints at one priority; Canopy's groups share their leaf's endpoint
  // array, so the same array at the same priority is the same group in every CLA that holds it.
  const groupIndex = new Map<readonly Endpoint[], Map<number, number>>();
  const claIndex = new Map<string, number>();
  const clas: number[][] = [];
  const out: Record<string, number> = {};
  for (const client of clients) {
    const entry = cache.lookup(state, client);
    let c = claIndex.get(entry.key);
    if (c === undefined) {
      c = clas.length;
      claIndex.set(entry.key, c);
      clas.push(
        entry.cla.groups.map((g) => {
          let byPriority = groupIndex.get(g.endpoints);
          if (!byPriority) groupIndex.set(g.endpoints, (byPriority = new Map()));
          let i = byPriority.get(g.priority);
          if (i === undefined) {
            i = groups.length;
            byPriority.set(g.priority, i);
            const { region, zone, subzone } = g.locality;
            groups.push({
              priority: g.priority,
              locality: { region, zone, subzone },
              endpoints: g.endpoints.map(endpointKey),
            });
          }
          return i;
        }),
      );
    }
    out[localityKey(client)] = c;
  }
  return {
    service: spec.name,
    overprovisioningFactor: spec.loadBalancing.overprovisioningFactor,
    groups,
    clas,
    clients: out,
  };
}

export function writePeerPlan(file: string, plan: PeerPlan): void {
  writeFileSync(file, JSON.stringify(plan));
}
