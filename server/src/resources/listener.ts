/**
 * Listener: for proxyless gRPC, an API listener per service (what it resolves
 * `xds:///name` to), its HttpConnectionManager pointing at the service's
 * RouteConfiguration over ADS, with the router filter last. For an Envoy
 * sidecar, a real outbound listener (envoy-listener.ts); Envoy refuses
 * api_listeners over LDS.
 */
import { kindOf } from '../domain/client.js';
import type { Mesh } from '../domain/mesh.js';
import { encodeMessage } from '../wire/protos.js';
import { encodeEnvoyListener, outboundBind } from './envoy-listener.js';
import { makeResource, type Resource } from './resource.js';
import { servicesAsNames, type ResourceType } from './resource-type.js';
import { LISTENER_TYPE, ROUTE_TYPE } from './type-urls.js';

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
  // Proxyless: depends on the name alone, encoded once per service.
  const held = new Map<string, Resource>();
  // Envoy: per service, by bind address and spec; a handful of binds per service.
  const envoy = new Map<string, Map<string, Resource>>();
  return {
    typeUrl: LISTENER_TYPE,
    shortName: 'LDS',
    fullStateInSotw: true,
    demandScoped: true,
    pushRank: 2,
    names: () => mesh.list().map((s) => s.name),
    resolve(name, client) {
      const service = mesh.get(name);
      if (!service) return undefined;
      if (kindOf(client) === 'envoy') {
        const bind = outboundBind(service.spec, client);
        if (!bind) return undefined;
        const { protocol } = service.spec;
        const key = `${bind.address}|${bind.port}|${protocol ?? ''}`;
        let byKey = envoy.get(name);
        if (!byKey) envoy.set(name, (byKey = new Map()));
        let e = byKey.get(key);
        if (!e) byKey.set(key, (e = makeResource(name, LISTENER_TYPE, encodeEnvoyListener(service.spec, bind))));
        return e;
      }
      let r = held.get(name);
      if (!r) held.set(name, (r = makeResource(name, LISTENER_TYPE, encodeListener(name, name))));
      return r;
    },
    touchedBy: servicesAsNames,
    // Both shapes name the service's RouteConfiguration (route_config_name).
    warms: (name) => [{ typeUrl: ROUTE_TYPE, names: [name] }],
    forget: (service) => {
      held.delete(service);
      envoy.delete(service);
    },
  };
}
