/**
 * Listener: for proxyless gRPC, an API listener per service (what it resolves
 * `xds:///name` to), its HttpConnectionManager pointing at the service's
 * RouteConfiguration over ADS, with the router filter last. For an Envoy
 * sidecar, its outbound listeners (envoy-listener.ts, laid out by
 * domain/outbound.ts); Envoy refuses api_listeners over LDS.
 */
import { kindOf, type Client } from '../domain/client.js';
import type { Mesh } from '../domain/mesh.js';
import { encodeMessage } from '../wire/protos.js';
import { DEFAULT_VIRTUAL_OUTBOUND_PORT, routeNameOf, VIRTUAL_OUTBOUND_NAME } from '../domain/outbound.js';
import { encodeGroupListener, encodeVirtualOutbound } from './envoy-listener.js';
import { demanded, OutboundLayouts, outboundModeOf } from './outbound-layouts.js';
import { makeResource, type Resource } from './resource.js';
import { proxylessShareGroup, type ResourceType } from './resource-type.js';
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

export function listenerType(mesh: Mesh, layouts = new OutboundLayouts(mesh)): ResourceType {
  // Proxyless: depends on the name alone, encoded once per service.
  const held = new Map<string, Resource>();
  // Envoy: by listener name, address and members; cleared when the layout changes.
  const envoy = new Map<string, Resource>();
  let envoyVersion = -1;
  const seen = { version: -1 };
  return {
    typeUrl: LISTENER_TYPE,
    shortName: 'LDS',
    fullStateInSotw: true,
    demandScoped: true,
    wholeOnDemand: true,
    pushRank: 2,
    names: () => [...mesh.list().map((s) => s.name), ...layouts.sharedNames(), VIRTUAL_OUTBOUND_NAME],
    shares: { shareGroup: (_name, client) => proxylessShareGroup(client) },
    resolve(name, client) {
      if (kindOf(client) === 'envoy') {
        if (envoyVersion !== mesh.layoutVersion) {
          envoy.clear();
          envoyVersion = mesh.layoutVersion;
        }
        return resolveEnvoy(name, client);
      }
      if (!mesh.get(name)) return undefined;
      let r = held.get(name);
      if (!r) held.set(name, (r = makeResource(name, LISTENER_TYPE, encodeListener(name, name))));
      return r;
    },
    touchedBy: (services) => layouts.touched(services, seen, [VIRTUAL_OUTBOUND_NAME]),
    // A listener warms until its RouteConfiguration arrives: proxyless, the service's; Envoy, its group's (none for
    // the virtual listener and TCP-only groups).
    warming: {
      warms: (name, client) => {
        if (kindOf(client) !== 'envoy') return [{ typeUrl: ROUTE_TYPE, names: [name] }];
        const group = layouts.get(outboundModeOf(client)).groups.get(name);
        return group && group.http.length > 0 ? [{ typeUrl: ROUTE_TYPE, names: [routeNameOf(group)] }] : [];
      },
    },
    forget: (service) => {
      held.delete(service);
    },
  };

  function resolveEnvoy(name: string, client: Client): Resource | undefined {
    const mode = outboundModeOf(client);
    const virtualPort = client.virtualOutboundPort ?? DEFAULT_VIRTUAL_OUTBOUND_PORT;
    if (name === VIRTUAL_OUTBOUND_NAME) {
      if (mode !== 'transparent') return undefined;
      return cached(`${name}|${virtualPort}`, () => encodeVirtualOutbound(name, virtualPort), name);
    }
    const group = layouts.get(mode).groups.get(name);
    if (!group) return undefined;
    // The virtual listener holds its port: a service listener there would repeat its address.
    if (mode === 'transparent' && group.port === virtualPort) return undefined;
    const all = [...group.http, ...group.tcpByVip, ...(group.tcp ? [group.tcp] : [])].map((s) => s.name);
    // On demand: every HTTP/gRPC service stays (its route names the cluster Envoy fetches); TCP ones are demanded.
    const onDemand = client.onDemand === true && group.http.length > 0;
    const members = demanded(client, all, onDemand ? group.http.map((s) => s.name) : []);
    if (members.size === 0) return undefined;
    const address = mode === 'local' ? client.outboundAddress! : '0.0.0.0';
    const key = `${name}|${address}|${onDemand ? 'od' : ''}|${members.size === all.length ? '' : [...members].join(',')}`;
    return cached(key, () => encodeGroupListener(group, address, members, onDemand), name);
  }

  function cached(key: string, encode: () => Uint8Array, name: string): Resource {
    let r = envoy.get(key);
    if (!r) envoy.set(key, (r = makeResource(name, LISTENER_TYPE, encode())));
    return r;
  }
}
