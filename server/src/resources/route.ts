/**
 * RouteConfiguration. Proxyless gRPC: one per service, one virtual host that
 * every request goes to the service's cluster from, matched by the service's
 * name, name:port, VIP:port, VIP, and '*'; a re-created service's incarnation
 * (incarnations.ts) is one more domain, and the route names the incarnation's
 * cluster. Envoy: one per listener's HTTP services (envoy-route.ts).
 */
import { kindOf, type Client } from '../domain/client.js';
import type { Mesh, ServiceState } from '../domain/mesh.js';
import { encodeMessage } from '../wire/protos.js';
import { encodeEnvoyRouteConfiguration } from './envoy-route.js';
import type { Incarnations } from './incarnations.js';
import { demanded, OutboundLayouts, outboundModeOf } from './outbound-layouts.js';
import { makeResource, type Resource } from './resource.js';
import { proxylessShareGroup, type ResourceType } from './resource-type.js';
import { ROUTE_TYPE } from './type-urls.js';

export function encodeRouteConfiguration(
  name: string,
  domains: readonly string[],
  clusterName: string,
  incarnation = 0,
): Uint8Array {
  // Clients compare what they parse (gRPC C-core ignores a route's name): the incarnation goes in as
  // one more domain, under .invalid, which no request's authority carries.
  const all = incarnation > 0 ? [...domains, `incarnation-${incarnation}.${name}.canopy.invalid`] : domains;
  return encodeMessage('envoy.config.route.v3.RouteConfiguration', {
    name,
    virtual_hosts: [{ name, domains: all, routes: [{ match: { prefix: '' }, route: { cluster: clusterName } }] }],
  });
}

export function routeType(mesh: Mesh, incarnations: Incarnations, layouts = new OutboundLayouts(mesh)): ResourceType {
  // Proxyless: encoded again only when the domains change (port or VIP).
  const proxyless = new Map<string, { shape: string; resource: Resource }>();
  // Envoy: by route name, mode and members; cleared when the layout changes.
  const envoy = new Map<string, Resource>();
  let envoyVersion = -1;
  const seen = { version: -1 };
  return {
    typeUrl: ROUTE_TYPE,
    shortName: 'RDS',
    fullStateInSotw: false,
    pushRank: 3,
    names: () => [...mesh.list().map((s) => s.name), ...layouts.sharedNames()],
    shares: { shareGroup: (_name, client) => proxylessShareGroup(client) },
    resolve(name, client) {
      if (kindOf(client) === 'envoy') {
        if (envoyVersion !== mesh.layoutVersion) {
          envoy.clear();
          envoyVersion = mesh.layoutVersion;
        }
        return resolveEnvoy(name, client);
      }
      const service = mesh.get(name);
      if (!service) return undefined;
      const cluster = incarnations.clusterOf(name);
      const shape = `${service.spec.port ?? ''}|${service.spec.vip ?? ''}|${cluster}`;
      const hit = proxyless.get(name);
      if (hit?.shape === shape) return hit.resource;
      const bytes = encodeRouteConfiguration(name, routeDomains(service), cluster, incarnations.of(name));
      const resource = makeResource(name, ROUTE_TYPE, bytes);
      proxyless.set(name, { shape, resource });
      return resource;
    },
    touchedBy: (services) => layouts.touched(services, seen),
    forget: (service) => {
      proxyless.delete(service);
    },
  };

  function resolveEnvoy(name: string, client: Client): Resource | undefined {
    const mode = outboundModeOf(client);
    const services = layouts.get(mode).routes.get(name);
    if (!services) return undefined;
    const names = services.map((s) => s.name);
    // On demand: the route names every service's cluster, and Envoy fetches the one it lacks.
    const members = demanded(client, names, client.onDemand === true ? names : []);
    if (members.size === 0) return undefined;
    const key = `${mode}|${name}|${members.size === services.length ? '' : [...members].join(',')}`;
    let r = envoy.get(key);
    if (!r) {
      const bytes = encodeEnvoyRouteConfiguration(
        name,
        services.filter((s) => members.has(s.name)),
        mode,
      );
      envoy.set(key, (r = makeResource(name, ROUTE_TYPE, bytes)));
    }
    return r;
  }
}

function routeDomains(service: ServiceState): string[] {
  const { name, port, vip } = service.spec;
  const domains = [name];
  if (port !== undefined) domains.push(`${name}:${port}`);
  if (vip !== undefined && port !== undefined) domains.push(`${vip}:${port}`);
  if (vip !== undefined) domains.push(vip);
  domains.push('*');
  return domains;
}
