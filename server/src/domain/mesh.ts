/**
 * The services Canopy serves, each with its locality tree. Applying a spec
 * diffs it against what is held: only endpoints that changed touch the tree.
 */
import { isIp } from './ip.js';
import type { ServiceLoad } from './load/load-cla.js';
import { LocalityTree } from './locality-tree.js';
import { samePolicy } from './policy.js';
import { endpointKey, isRoutable, sameEndpoint, type Endpoint, type ServiceSpec } from './service.js';

export class ServiceState {
  readonly tree: LocalityTree;
  /** Every endpoint, routable or not, by endpointKey. */
  readonly endpoints = new Map<string, Endpoint>();
  /** Bumped on every change that can alter what a client is sent. */
  generation = 0;
  /** How many endpoints are healthy; at 0 the terminating ones serve (kube-proxy's fallback). */
  private healthy = 0;
  /** Keys of the terminating endpoints. */
  private readonly terminating = new Set<string>();
  /** Whether the terminating endpoints are in the tree now (healthy was 0 at the last change). */
  private servingTerminating = true;
  /** Load-aware weights per client node, set by the load controller; absent = plain CLAs. */
  load: ServiceLoad | undefined;
  /** How many endpoints name a host rather than an address: kept per change, so asking costs nothing. */
  private hostnames = 0;

  /** The service as a spec. After a patch its endpoint list is built from `endpoints` on first read. */
  constructor(public spec: ServiceSpec) {
    this.tree = new LocalityTree(spec.loadBalancing.routingPreference);
  }

  /**
   * Applies endpoint upserts and removals by key, without diffing the rest:
   * O(changed × depth). Returns the keys that changed.
   */
  patch(upserts: readonly Endpoint[], removals: readonly string[] = []): string[] {
    const touched: string[] = [];
    for (const ep of upserts) {
      const key = endpointKey(ep);
      if (this.upsertEndpoint(ep, key)) touched.push(key);
    }
    for (const key of removals) if (this.removeEndpoint(key)) touched.push(key);
    if (touched.length > 0) this.spec = withEndpointsOf(this.spec, this.endpoints);
    return touched;
  }

  get name(): string {
    return this.spec.name;
  }

  /** New load-aware weights: a change of what clients are sent, like an endpoint change. */
  setLoad(load: ServiceLoad | undefined): void {
    this.load = load;
    this.generation++;
  }

  /** Upserts one endpoint; returns whether anything changed. */
  upsertEndpoint(ep: Endpoint, key = endpointKey(ep)): boolean {
    const old = this.endpoints.get(key);
    if (old && sameEndpoint(old, ep)) return false;
    if (old) this.count(old, key, -1);
    // The key holds the address: a replaced endpoint keeps its kind of address, a new one is parsed once.
    else if (!isIp(ep.address)) this.hostnames++;
    this.endpoints.set(key, ep);
    this.count(ep, key, 1);
    if (this.serves(ep)) this.tree.upsert(ep, key, old);
    else if (old) this.tree.remove(key, old);
    this.fallBack();
    this.generation++;
    return true;
  }

  removeEndpoint(key: string): boolean {
    const old = this.endpoints.get(key);
    if (!old) return false;
    this.endpoints.delete(key);
    this.count(old, key, -1);
    if (!isIp(old.address)) this.hostnames--;
    this.tree.remove(key, old);
    this.fallBack();
    this.generation++;
    return true;
  }

  /** Terminating endpoints serve: no endpoint is healthy (kube-proxy's rule). */
  get fallback(): boolean {
    return this.healthy === 0 && this.terminating.size > 0;
  }

  /** Does this endpoint of the service receive new traffic (is it in the tree)? */
  serves(ep: Endpoint): boolean {
    return isRoutable(ep) || (ep.health === 'terminating' && this.healthy === 0);
  }

  /** The endpoints held but not served (sent to Envoy sidecars to drain). */
  *parked(): Iterable<Endpoint> {
    for (const ep of this.endpoints.values()) if (!this.serves(ep)) yield ep;
  }

  /** Does some endpoint, served or not, name a host rather than an address (domain/dns-spec.ts)? */
  get hasHostnames(): boolean {
    return this.hostnames > 0;
  }

  private count(ep: Endpoint, key: string, d: 1 | -1): void {
    if (ep.health === 'healthy') this.healthy += d;
    else if (ep.health === 'terminating') {
      if (d > 0) this.terminating.add(key);
      else this.terminating.delete(key);
    }
  }

  /** The last healthy endpoint went, or the first came back: the terminating ones join or leave the tree. */
  private fallBack(): void {
    const now = this.healthy === 0;
    if (now === this.servingTerminating) return;
    this.servingTerminating = now;
    for (const key of this.terminating) {
      const ep = this.endpoints.get(key)!;
      if (now) this.tree.upsert(ep, key, undefined);
      else this.tree.remove(key, ep);
    }
  }
}

/**
 * A copy of `spec` whose endpoint list is read from `endpoints` when first
 * asked for, so a one-endpoint patch of a large service copies nothing. The
 * other fields are copied without reading `spec.endpoints`.
 */
function withEndpointsOf(spec: ServiceSpec, endpoints: ReadonlyMap<string, Endpoint>): ServiceSpec {
  const out: Record<string, unknown> = {};
  for (const k of Object.keys(spec)) if (k !== 'endpoints') out[k] = (spec as unknown as Record<string, unknown>)[k];
  let list: Endpoint[] | undefined;
  Object.defineProperty(out, 'endpoints', { enumerable: true, get: () => (list ??= [...endpoints.values()]) });
  return out as unknown as ServiceSpec;
}

export interface MeshChange {
  readonly service: string;
  readonly kind: 'created' | 'updated' | 'deleted';
  /** Endpoint keys added, changed or removed (empty for a policy-only change). */
  readonly endpoints: readonly string[];
}

export class Mesh {
  private readonly services = new Map<string, ServiceState>();
  /**
   * Bumped when a service is created, deleted, or changes anything but its
   * endpoints: what depends on the set of services and their settings alone
   * (listener layouts, route configurations) is recomputed only then.
   */
  layoutVersion = 0;

  get(name: string): ServiceState | undefined {
    return this.services.get(name);
  }

  list(): ServiceState[] {
    return [...this.services.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  get size(): number {
    return this.services.size;
  }

  /** Creates or updates a service; undefined when the spec equals what is held. */
  put(spec: ServiceSpec): MeshChange | undefined {
    const current = this.services.get(spec.name);
    const { endpoints, ...rest } = spec;
    if (!current || !sameShape(current.spec, spec)) {
      // A new service, or new scopes or policy: rebuild its tree.
      const next = new ServiceState({ ...rest, endpoints: [] });
      for (const ep of endpoints) next.upsertEndpoint(ep);
      next.generation = (current?.generation ?? 0) + 1;
      next.spec = spec;
      this.services.set(spec.name, next);
      this.layoutVersion++;
      return { service: spec.name, kind: current ? 'updated' : 'created', endpoints: [...next.endpoints.keys()] };
    }
    const touched: string[] = [];
    const wanted = new Set<string>();
    for (const ep of endpoints) {
      const key = endpointKey(ep);
      wanted.add(key);
      if (current.upsertEndpoint(ep, key)) touched.push(key);
    }
    for (const key of [...current.endpoints.keys()]) {
      if (!wanted.has(key) && current.removeEndpoint(key)) touched.push(key);
    }
    current.spec = spec;
    return touched.length > 0 ? { service: spec.name, kind: 'updated', endpoints: touched } : undefined;
  }

  /** Upserts and removes endpoints of an existing service; undefined when nothing changed. */
  patch(name: string, upserts: readonly Endpoint[], removals: readonly string[] = []): MeshChange | undefined {
    const current = this.services.get(name);
    if (!current) return undefined;
    const touched = current.patch(upserts, removals);
    return touched.length > 0 ? { service: name, kind: 'updated', endpoints: touched } : undefined;
  }

  delete(name: string): MeshChange | undefined {
    const current = this.services.get(name);
    if (!current) return undefined;
    this.services.delete(name);
    this.layoutVersion++;
    return { service: name, kind: 'deleted', endpoints: [...current.endpoints.keys()] };
  }
}

function sameShape(a: ServiceSpec, b: ServiceSpec): boolean {
  const la = a.loadBalancing;
  const lb = b.loadBalancing;
  return (
    a.port === b.port &&
    a.vip === b.vip &&
    String(a.vips) === String(b.vips) &&
    la.mode === lb.mode &&
    la.crossNetworkFailover === lb.crossNetworkFailover &&
    la.overprovisioningFactor === lb.overprovisioningFactor &&
    samePolicy(la.policy, lb.policy) &&
    la.reach?.minEndpoints === lb.reach?.minEndpoints &&
    JSON.stringify(la.loadAware) === JSON.stringify(lb.loadAware) &&
    la.routingPreference.length === lb.routingPreference.length &&
    la.routingPreference.every((s, i) => s === lb.routingPreference[i]) &&
    sameSidecarSettings(a, b)
  );
}

/** A change of protocol, timeouts or health settings changes listeners and clusters: it is a change. */
function sameSidecarSettings(a: ServiceSpec, b: ServiceSpec): boolean {
  const key = (s: ServiceSpec) =>
    JSON.stringify([
      s.protocol,
      s.connectTimeoutMs,
      s.outlierDetection,
      s.healthCheck,
      s.outboundPort,
      s.timeoutMs,
      s.idleTimeoutMs,
      s.retries,
      s.unhealthy,
    ]);
  return key(a) === key(b);
}
