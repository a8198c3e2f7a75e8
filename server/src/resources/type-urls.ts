/** xDS type URLs, one literal type per resource kind. */
export const LISTENER_TYPE = 'type.googleapis.com/envoy.config.listener.v3.Listener';
export const ROUTE_TYPE = 'type.googleapis.com/envoy.config.route.v3.RouteConfiguration';
export const CLUSTER_TYPE = 'type.googleapis.com/envoy.config.cluster.v3.Cluster';
export const ENDPOINT_TYPE = 'type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment';
/** LEDS: one endpoint of a locality's collection (resources/endpoint/leds.ts). */
export const LEDS_TYPE = 'type.googleapis.com/envoy.config.endpoint.v3.LbEndpoint';

/** Canopy's own type: a service's compiled locality tree, for node agents (proto/canopy/v1/locality_tree.proto). */
export const TREE_TYPE = 'type.googleapis.com/canopy.v1.LocalityTree';

export type XdsTypeUrl = typeof LISTENER_TYPE | typeof ROUTE_TYPE | typeof CLUSTER_TYPE | typeof ENDPOINT_TYPE;

export const XDS_TYPES: readonly XdsTypeUrl[] = [LISTENER_TYPE, ROUTE_TYPE, CLUSTER_TYPE, ENDPOINT_TYPE];

const SHORT: Record<string, string> = {
  [LISTENER_TYPE]: 'LDS',
  [ROUTE_TYPE]: 'RDS',
  [CLUSTER_TYPE]: 'CDS',
  [ENDPOINT_TYPE]: 'EDS',
  [LEDS_TYPE]: 'LEDS',
  [TREE_TYPE]: 'TREE',
};

/** 'LDS', 'RDS', 'CDS', 'EDS', 'LEDS', 'TREE', or 'other' (metric labels stay bounded whatever clients send). */
export function shortTypeName(typeUrl: string): string {
  return SHORT[typeUrl] ?? 'other';
}
