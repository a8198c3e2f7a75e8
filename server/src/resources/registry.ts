/**
 * Resolves resource names to encoded resources for one client. Listener,
 * RouteConfiguration and Cluster depend on the service alone and are encoded
 * once per service; a ClusterLoadAssignment depends on where the client is and
 * comes from the locality-keyed CLA cache, wrapped once per cache entry.
 */
import { ClaCache, type ClaEntry } from '../domain/cla-cache.js';
import type { Placement } from '../domain/locality.js';
import type { Mesh, ServiceState } from '../domain/mesh.js';
import { encodeClaBytes, encodeCluster, encodeListener, encodeRouteConfiguration } from './endpoint-codec.js';
import { makeResource, type Resource } from './resource.js';
import type { Bytes } from '../wire/rope.js';
import { encodeLocalityTree, kernelServable } from './tree-codec.js';
import { CLUSTER_TYPE, ENDPOINT_TYPE, LISTENER_TYPE, ROUTE_TYPE, TREE_TYPE } from './type-urls.js';

/** The server's CLA cache: entries are ropes that follow the tree (or contiguous bytes). */
export type ServerClaCache = ClaCache<Bytes>;

/** A CLA cache with the server's encoder. */
export function serverClaCache(): ServerClaCache {
  return new ClaCache<Bytes>(encodeClaBytes, { liveSpans: true });
}

interface ServiceResources {
  readonly shape: string;
  readonly listener: Resource;
  readonly route: Resource;
  readonly cluster: Resource;
}

export class ResourceCatalog {
  private readonly perService = new Map<string, ServiceResources>();
  private readonly claResources = new WeakMap<ClaEntry<Bytes>, Resource>();
  /** The compiled tree of a service, encoded once per generation for every node agent. */
  private readonly trees = new WeakMap<ServiceState, { generation: number; resource: Resource }>();

  constructor(
    private readonly mesh: Mesh,
    private readonly claCache: ServerClaCache,
  ) {}

  /** Every name of a type, for wildcard subscriptions. */
  names(typeUrl: string): string[] {
    const services = this.mesh.list();
    // Only a service with an IPv4 VIP and a port can be intercepted by connect4.
    return (typeUrl === TREE_TYPE ? services.filter((s) => kernelServable(s.spec)) : services).map((s) => s.name);
  }

  resolve(typeUrl: string, name: string, client: Placement): Resource | undefined {
    const service = this.mesh.get(name);
    if (!service) return undefined;
    switch (typeUrl) {
      case LISTENER_TYPE:
        return this.static(service).listener;
      case ROUTE_TYPE:
        return this.static(service).route;
      case CLUSTER_TYPE:
        return this.static(service).cluster;
      case ENDPOINT_TYPE:
        return this.cla(this.claCache.lookup(service, client));
      case TREE_TYPE:
        return this.tree(service);
      default:
        return undefined;
    }
  }

  /** Forgets what a deleted service left behind. */
  forget(name: string): void {
    this.perService.delete(name);
    this.claCache.forget(name);
  }

  private static(service: ServiceState): ServiceResources {
    const held = this.perService.get(service.name);
    const shape = `${service.spec.port ?? ''}|${service.spec.vip ?? ''}`;
    if (held?.shape === shape) return held;
    const name = service.name;
    const fresh: ServiceResources = {
      shape,
      listener: makeResource(name, LISTENER_TYPE, encodeListener(name, name)),
      route: makeResource(name, ROUTE_TYPE, encodeRouteConfiguration(name, routeDomains(service), name)),
      cluster: makeResource(name, CLUSTER_TYPE, encodeCluster(name, name)),
    };
    this.perService.set(name, fresh);
    return fresh;
  }

  private tree(service: ServiceState): Resource | undefined {
    if (!kernelServable(service.spec)) return undefined;
    const held = this.trees.get(service);
    if (held?.generation === service.generation) return held.resource;
    const resource = makeResource(service.name, TREE_TYPE, encodeLocalityTree(service.spec, service.tree.compile()));
    this.trees.set(service, { generation: service.generation, resource });
    return resource;
  }

  private cla(entry: ClaEntry<Bytes>): Resource {
    let r = this.claResources.get(entry);
    if (!r) {
      r = makeResource(entry.service, ENDPOINT_TYPE, entry.bytes);
      this.claResources.set(entry, r);
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
