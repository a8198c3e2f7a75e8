/**
 * RouteConfiguration: one virtual host per service that every request goes
 * to the service's cluster from, matched by the service's name, name:port,
 * VIP:port, VIP, and '*'.
 * A re-created service's incarnation (incarnations.ts) is one more domain,
 * and a proxyless client's route names the incarnation's cluster.
 */
import { kindOf } from '../domain/client.js';
import type { Mesh, ServiceState } from '../domain/mesh.js';
import { encodeMessage } from '../wire/protos.js';
import type { Incarnations } from './incarnations.js';
import { makeResource, type Resource } from './resource.js';
import { servicesAsNames, type ResourceType } from './resource-type.js';
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

export function routeType(mesh: Mesh, incarnations: Incarnations): ResourceType {
  // Encoded again only when the domains change (port or VIP); per service, Envoy's and proxyless clients'.
  const held = new Map<string, { shape: string; resource: Resource }>();
  const proxyless = new Map<string, { shape: string; resource: Resource }>();
  return {
    typeUrl: ROUTE_TYPE,
    shortName: 'RDS',
    fullStateInSotw: false,
    pushRank: 3,
    names: () => mesh.list().map((s) => s.name),
    resolve(name, client) {
      const service = mesh.get(name);
      if (!service) return undefined;
      // Envoy's clusters come by wildcard, named by service: only proxyless clients follow incarnations.
      const cache = kindOf(client) === 'envoy' ? held : proxyless;
      const cluster = cache === held ? name : incarnations.clusterOf(name);
      const shape = `${service.spec.port ?? ''}|${service.spec.vip ?? ''}|${cluster}`;
      const hit = cache.get(name);
      if (hit?.shape === shape) return hit.resource;
      const bytes = encodeRouteConfiguration(name, routeDomains(service), cluster, incarnations.of(name));
      const resource = makeResource(name, ROUTE_TYPE, bytes);
      cache.set(name, { shape, resource });
      return resource;
    },
    touchedBy: servicesAsNames,
    forget: (service) => {
      held.delete(service);
      proxyless.delete(service);
    },
  };
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
