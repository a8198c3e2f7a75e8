/**
 * Envoy's local cluster for zone-aware routing (istiod's self-discovery
 * `local_cluster`): an Envoy whose bootstrap has an EDS cluster named
 * `local_cluster` as `cluster_manager.local_cluster_name`, and whose node
 * metadata names its own service (`canopy.local_service`), is sent that
 * service's routable endpoints in its own region, one locality per zone, all
 * at priority 0. Envoy compares how its own service spreads over the zones
 * with how the upstream does, and keeps as much traffic in its zone as that
 * balance allows (Istio filters the same way: same workload, same region).
 */
import { kindOf, type Client } from '../../domain/client.js';
import type { Mesh } from '../../domain/mesh.js';
import { isRoutable, type Endpoint } from '../../domain/service.js';
import { encodeMessage } from '../../wire/protos.js';
import { makeResource, type Resource } from '../resource.js';
import { ENDPOINT_TYPE } from '../type-urls.js';

/** The cluster name Istio's bootstrap template gives the self-discovery cluster. */
export const LOCAL_CLUSTER = 'local_cluster';

/** Does this name ask for the client's local cluster (an Envoy that named its service)? */
export function isLocalClusterRequest(name: string, client: Client): boolean {
  return name === LOCAL_CLUSTER && kindOf(client) === 'envoy' && client.localService !== undefined;
}

/** The client's local cluster CLA; an empty one while its service is unknown or has no endpoint in its region. */
export function localClusterResource(mesh: Mesh, client: Client): Resource {
  const service = client.localService !== undefined ? mesh.get(client.localService) : undefined;
  const region = client.locality.region;
  const byZone = new Map<string, Endpoint[]>();
  for (const e of service?.endpoints.values() ?? []) {
    if (!isRoutable(e) || e.locality.region !== region) continue;
    const key = `${e.locality.zone}\u0000${e.locality.subzone}`;
    const list = byZone.get(key);
    if (list) list.push(e);
    else byZone.set(key, [e]);
  }
  const endpoints = [...byZone.values()].map((eps) => ({
    locality: { region, zone: eps[0]!.locality.zone, sub_zone: eps[0]!.locality.subzone },
    lb_endpoints: eps.map((e) => ({
      endpoint: { address: { socket_address: { address: e.address, port_value: e.port } } },
      load_balancing_weight: { value: e.weight },
    })),
    load_balancing_weight: { value: eps.reduce((n, e) => n + e.weight, 0) },
  }));
  const bytes = encodeMessage('envoy.config.endpoint.v3.ClusterLoadAssignment', {
    cluster_name: LOCAL_CLUSTER,
    endpoints,
  });
  return makeResource(LOCAL_CLUSTER, ENDPOINT_TYPE, bytes);
}
