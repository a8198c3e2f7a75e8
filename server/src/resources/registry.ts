/**
 * The resource types a server serves, by type URL. Adding a type is adding
 * one module beside this one and listing it in `canopyResources`.
 */
import { kindOf, type Client } from '../domain/client.js';
import { DEFAULT_LAZY, type DemandSet, type LazySettings } from '../domain/demand.js';
import type { Mesh } from '../domain/mesh.js';
import type { NodeInfo } from '../wire/request.js';
import { DemandRegistry } from './demand-registry.js';
import { clusterType } from './cluster.js';
import { endpointType, type ServerClaCache } from './endpoint/endpoint.js';
import { Incarnations } from './incarnations.js';
import { LedsClaCache } from './endpoint/leds-cla.js';
import { ledsType } from './endpoint/leds.js';
import { listenerType } from './listener.js';
import { localityTreeType } from './locality-tree.js';
import type { ResourceType, ResourceTypes } from './resource-type.js';
import { OutboundLayouts } from './outbound-layouts.js';
import { routeType } from './route.js';
import { LEDS_TYPE } from './type-urls.js';
import { CodedError } from '../domain/errors.js';

export class ResourceRegistry implements ResourceTypes {
  private readonly byUrl = new Map<string, ResourceType>();

  constructor(
    types: Iterable<ResourceType>,
    private readonly incarnations = new Incarnations(),
    private readonly demand?: DemandRegistry,
    /** The server-wide LEDS switch (`--leds`); LEDS is served only when its type is registered too. */
    private readonly leds = true,
  ) {
    for (const t of types) {
      if (this.byUrl.has(t.typeUrl))
        throw new CodedError('CANOPY_BROKEN_INVARIANT', `resource type ${t.typeUrl} registered twice`);
      this.byUrl.set(t.typeUrl, t);
    }
  }

  get(typeUrl: string): ResourceType | undefined {
    return this.byUrl.get(typeUrl);
  }

  demandFor(node: NodeInfo | undefined): DemandSet | undefined {
    return this.demand?.forNode(node);
  }

  servesLeds(): boolean {
    return this.leds && this.byUrl.has(LEDS_TYPE);
  }

  types(): readonly ResourceType[] {
    return [...this.byUrl.values()];
  }

  /** Per type URL, the names a change to these services touches. */
  touchedBy(services: ReadonlySet<string>): Map<string, ReadonlySet<string>> {
    const out = new Map<string, ReadonlySet<string>>();
    for (const t of this.byUrl.values()) out.set(t.typeUrl, new Set(t.touchedBy(services)));
    return out;
  }

  /** The name this client knows a service's cluster by (load reports name it so). */
  clusterNameFor(service: string, client: Client): string {
    return this.incarnations.clusterFor(service, kindOf(client));
  }

  /** Forgets what a deleted service left behind, in every type. */
  forget(service: string): void {
    this.incarnations.deleted(service);
    for (const t of this.byUrl.values()) t.forget(service);
  }
}

/** Every type Canopy serves: Envoy's four, LEDS and the node agents' locality tree. */
export function canopyResources(
  mesh: Mesh,
  claCache: ServerClaCache,
  lazy: LazySettings = DEFAULT_LAZY,
  options: { readonly leds?: boolean } = {},
): ResourceRegistry {
  const incarnations = new Incarnations();
  const leds = options.leds ?? true;
  const layouts = new OutboundLayouts(mesh);
  const endpoints = endpointType(mesh, claCache, leds ? new LedsClaCache() : undefined);
  // A DNS cluster carries the CLA an Envoy would get over EDS, whole (no LEDS: resources/dns-cluster.ts).
  const envoyCla = (service: string, client: Client) => endpoints.resolve(service, { ...client, leds: false });
  return new ResourceRegistry(
    [
      listenerType(mesh, layouts),
      routeType(mesh, incarnations, layouts),
      clusterType(mesh, incarnations, claCache, envoyCla),
      endpoints,
      ...(leds ? [ledsType(mesh)] : []),
      localityTreeType(mesh),
    ],
    incarnations,
    new DemandRegistry(lazy),
    leds,
  );
}
