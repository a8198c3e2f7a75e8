/**
 * What an Envoy sidecar is sent of a service's unhealthy and draining
 * endpoints (domain/upstream.ts `unhealthy`). `park`: the parked endpoints
 * after its CLA's last priority, with their health_status. Encoded as the CLA's
 * repeated `endpoints` fields alone, so they can follow the shared CLA bytes:
 * a repeated field may continue after other fields, and Envoy reads the
 * concatenation as one ClusterLoadAssignment.
 */
import type { ClaGroup } from '../../domain/cla.js';
import { countedStatus } from '../../domain/envoy-lb.js';
import { LedsStructure, type LedsPiece } from '../../domain/leds-structure.js';
import { localityKey, type Placement } from '../../domain/locality.js';
import type { ServiceState } from '../../domain/mesh.js';
import { endpointKey, type Endpoint, type Health } from '../../domain/service.js';
import { encodeMessage } from '../../wire/protos.js';
import { makeResource, type Resource } from '../resource.js';
import { ENDPOINT_TYPE } from '../type-urls.js';

/**
 * Parked endpoints keep DRAINING: their priority holds no healthy host, so whether Envoy excludes them
 * changes no share (domain/envoy-lb.ts), and it learns they drain.
 */
const HEALTH_STATUS: Readonly<Record<Health, string>> = {
  healthy: 'HEALTHY',
  unhealthy: 'UNHEALTHY',
  draining: 'DRAINING',
  // Parked: the service has healthy endpoints, so these drain (kube-proxy's rule).
  terminating: 'DRAINING',
};

export function encodeParkedGroups(groups: readonly ClaGroup[]): Uint8Array {
  return encodeMessage('envoy.config.endpoint.v3.ClusterLoadAssignment', {
    endpoints: groups.map((g) => ({
      locality: { region: g.locality.region, zone: g.locality.zone, sub_zone: g.locality.subzone },
      priority: g.priority,
      load_balancing_weight: { value: g.weight },
      lb_endpoints: g.endpoints.map((e) => ({
        endpoint: { address: { socket_address: { address: e.address, port_value: e.port } } },
        health_status: HEALTH_STATUS[e.health],
        ...(e.weight !== 1 ? { load_balancing_weight: { value: e.weight } } : {}),
      })),
    })),
  });
}

/** What the parked groups' bytes depend on. */
export function parkedSignature(groups: readonly ClaGroup[]): string {
  const parts: string[] = [];
  for (const g of groups) {
    parts.push(`${g.priority}`);
    for (const e of g.endpoints)
      parts.push(
        `${e.address}|${e.port}|${e.health}|${e.weight}|${g.locality.region}|${g.locality.zone}|${g.locality.subzone}`,
      );
  }
  return parts.join('\n');
}

/**
 * `unhealthy: count` on the CLA path: the CLA an Envoy sidecar on LEDS would
 * assemble from its collections, sent whole. Built from the same health-blind
 * pieces as the LEDS CLA (domain/leds-structure.ts), so both paths give Envoy
 * the same hosts, health and weights per priority and locality: one
 * LocalityLbEndpoints per (locality, priority), its hosts the pieces' pooled,
 * its weight the last piece's (as Envoy keeps it). Cached per service and
 * plan key until the service changes (a health flip changes these bytes).
 */
export class CountedClaCache {
  private readonly services = new Map<
    string,
    { structure: LedsStructure; generation: number; readonly byKey: Map<string, Resource> }
  >();

  lookup(state: ServiceState, client: Placement): Resource {
    let held = this.services.get(state.name);
    if (held?.structure.state !== state) {
      held = { structure: new LedsStructure(state), generation: -1, byKey: new Map() };
      this.services.set(state.name, held);
    }
    held.structure.sync();
    if (held.generation !== state.generation) {
      held.byKey.clear();
      held.generation = state.generation;
    }
    const plan = held.structure.planFor(client);
    const key = plan.key;
    let r = held.byKey.get(key);
    if (!r) {
      const bytes = encodeCountedCla(state, plan.pieces());
      held.byKey.set(key, (r = makeResource(state.name, ENDPOINT_TYPE, bytes)));
    }
    return r;
  }

  forget(service: string): void {
    this.services.delete(service);
  }
}

function encodeCountedCla(state: ServiceState, pieces: readonly LedsPiece[]): Uint8Array {
  const lbEndpoint = (e: Endpoint): object => ({
    endpoint: { address: { socket_address: { address: e.address, port_value: e.port } } },
    health_status: countedStatus(e.health, state.serves(e)),
    ...(e.weight !== 1 ? { load_balancing_weight: { value: e.weight } } : {}),
  });
  const groups = new Map<string, { piece: LedsPiece; weight: number; endpoints: Endpoint[] }>();
  for (const p of pieces) {
    const key = `${p.priority}\u0000${localityKey(p.locality)}`;
    let g = groups.get(key);
    if (!g) groups.set(key, (g = { piece: p, weight: p.weight, endpoints: [] }));
    g.weight = p.weight;
    // The tree's copy has the endpoint's place and weight; the service's has its health now.
    for (const e of p.endpoints) g.endpoints.push(state.endpoints.get(endpointKey(e)) ?? e);
  }
  return encodeMessage('envoy.config.endpoint.v3.ClusterLoadAssignment', {
    cluster_name: state.name,
    endpoints: [...groups.values()].map(({ piece, weight, endpoints }) => ({
      locality: { region: piece.locality.region, zone: piece.locality.zone, sub_zone: piece.locality.subzone },
      priority: piece.priority,
      load_balancing_weight: { value: weight },
      lb_endpoints: endpoints.map(lbEndpoint),
    })),
    policy: { overprovisioning_factor: { value: state.spec.loadBalancing.overprovisioningFactor } },
  });
}
