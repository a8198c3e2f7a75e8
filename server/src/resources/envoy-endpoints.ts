/**
 * The parked (draining, unhealthy) endpoints an Envoy sidecar is sent after
 * its CLA's last priority, with their health_status. Encoded as the CLA's
 * repeated `endpoints` fields alone, so they can follow the shared CLA bytes:
 * a repeated field may continue after other fields, and Envoy reads the
 * concatenation as one ClusterLoadAssignment.
 */
import type { ClaGroup } from '../domain/cla.js';
import type { Health } from '../domain/service.js';
import { encodeMessage } from '../wire/protos.js';

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
