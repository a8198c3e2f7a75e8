/** Cluster: one EDS cluster per service, its endpoints over ADS, round robin across the localities' weights. */
import type { Mesh } from '../domain/mesh.js';
import { encodeMessage } from '../wire/protos.js';
import { makeResource, type Resource } from './resource.js';
import { servicesAsNames, type ResourceType } from './resource-type.js';
import { CLUSTER_TYPE } from './type-urls.js';

export function encodeCluster(name: string, edsServiceName: string): Uint8Array {
  return encodeMessage('envoy.config.cluster.v3.Cluster', {
    name,
    type: 'EDS',
    eds_cluster_config: { eds_config: { ads: {}, resource_api_version: 'V3' }, service_name: edsServiceName },
    lb_policy: 'ROUND_ROBIN',
    connect_timeout: { seconds: 1 },
  });
}

export function clusterType(mesh: Mesh): ResourceType {
  // Depends on the name alone: encoded once per service.
  const held = new Map<string, Resource>();
  return {
    typeUrl: CLUSTER_TYPE,
    shortName: 'CDS',
    fullStateInSotw: true,
    pushRank: 0,
    names: () => mesh.list().map((s) => s.name),
    resolve(name) {
      if (!mesh.get(name)) return undefined;
      let r = held.get(name);
      if (!r) held.set(name, (r = makeResource(name, CLUSTER_TYPE, encodeCluster(name, name))));
      return r;
    },
    touchedBy: servicesAsNames,
    forget: (service) => held.delete(service),
  };
}
