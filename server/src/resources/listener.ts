/**
 * Listener: an API listener per service (what proxyless gRPC resolves
 * `xds:///name` to), its HttpConnectionManager pointing at the service's
 * RouteConfiguration over ADS, with the router filter last.
 */
import type { Mesh } from '../domain/mesh.js';
import { encodeMessage } from '../wire/protos.js';
import { makeResource, type Resource } from './resource.js';
import { servicesAsNames, type ResourceType } from './resource-type.js';
import { LISTENER_TYPE } from './type-urls.js';

const HCM_TYPE =
  'type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager';
const ROUTER_TYPE = 'type.googleapis.com/envoy.extensions.filters.http.router.v3.Router';

export function encodeListener(name: string, routeConfigName: string): Uint8Array {
  const router = encodeMessage('envoy.extensions.filters.http.router.v3.Router', {});
  const hcm = encodeMessage('envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager', {
    stat_prefix: name,
    rds: { config_source: { ads: {}, resource_api_version: 'V3' }, route_config_name: routeConfigName },
    http_filters: [{ name: 'envoy.filters.http.router', typed_config: { type_url: ROUTER_TYPE, value: router } }],
  });
  return encodeMessage('envoy.config.listener.v3.Listener', {
    name,
    api_listener: { api_listener: { type_url: HCM_TYPE, value: hcm } },
  });
}

export function listenerType(mesh: Mesh): ResourceType {
  // Depends on the name alone: encoded once per service.
  const held = new Map<string, Resource>();
  return {
    typeUrl: LISTENER_TYPE,
    shortName: 'LDS',
    fullStateInSotw: true,
    pushRank: 2,
    names: () => mesh.list().map((s) => s.name),
    resolve(name) {
      if (!mesh.get(name)) return undefined;
      let r = held.get(name);
      if (!r) held.set(name, (r = makeResource(name, LISTENER_TYPE, encodeListener(name, name))));
      return r;
    },
    touchedBy: servicesAsNames,
    forget: (service) => held.delete(service),
  };
}
