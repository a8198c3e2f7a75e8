/**
 * ClusterLoadAssignment: depends on where the client is, so it comes from the
 * locality-keyed CLA cache and is wrapped in an Any once per cache entry.
 * An Envoy sidecar gets the same bytes while every endpoint is routable;
 * otherwise, per the service's `unhealthy` (domain/upstream.ts): `count`, the
 * CLA its LEDS collections make (unhealthy endpoints in their priority,
 * envoy-endpoints.ts), or `park`, the same bytes plus the unhealthy endpoints
 * after the last priority. A client on LEDS gets the same traffic either way:
 * a `park` service is served to it with this full CLA (leds-cla.ts).
 */
import { ClaCache, type ClaEntry } from '../../domain/cla-cache.js';
import { kindOf } from '../../domain/client.js';
import type { Mesh, ServiceState } from '../../domain/mesh.js';
import { hasPolicy } from '../../domain/policy.js';
import { isRoutable } from '../../domain/service.js';
import { unhealthyOf } from '../../domain/upstream.js';
import { parkedGroups } from '../../domain/parked-endpoints.js';
import { flatten, type Bytes } from '../../wire/rope.js';
import { CountedClaCache, encodeParkedGroups, parkedSignature } from './envoy-endpoints.js';
import { encodeClaBytes } from './endpoint-codec.js';
import { LedsClaCache } from './leds-cla.js';
import { isLocalClusterRequest, LOCAL_CLUSTER, localClusterResource } from './local-cluster.js';
import { makeResource, type Resource } from '../resource.js';
import { servicesAsNames, type ResourceType } from '../resource-type.js';
import { ENDPOINT_TYPE } from '../type-urls.js';

/** The server's CLA cache: entries are ropes that follow the tree (or contiguous bytes). */
export type ServerClaCache = ClaCache<Bytes>;

/** A CLA cache with the server's encoder. */
export function serverClaCache(): ServerClaCache {
  return new ClaCache<Bytes>(encodeClaBytes, { liveSpans: true });
}

/**
 * `leds`: the LEDS CLA cache, when this server serves LEDS; a client marked
 * `leds` (Envoy on delta) then gets CLAs naming endpoint collections.
 */
export function endpointType(mesh: Mesh, claCache: ServerClaCache, leds?: LedsClaCache): ResourceType {
  const wrapped = new WeakMap<ClaEntry<Bytes>, Resource>();
  const withParked = new WeakMap<ClaEntry<Bytes>, { key: string; resource: Resource }>();
  const counted = new CountedClaCache();
  return {
    typeUrl: ENDPOINT_TYPE,
    shortName: 'EDS',
    fullStateInSotw: false,
    pushRank: 1,
    names: () => mesh.list().map((s) => s.name),
    shares: {
      shareGroup(name, client) {
        if (isLocalClusterRequest(name, client)) return undefined;
        const service = mesh.get(name);
        if (!service) return 'none';
        if (client.leds === true && !service.load && leds) return undefined;
        // An Envoy's bytes differ from the shared ones while some endpoint is not routable (resolve): then by placement.
        const kind = kindOf(client);
        if (kind === 'envoy' && hasUnroutable(service)) return undefined;
        return `${kind}\n${claCache.keyFor(service, client)}`;
      },
    },
    resolve(name, client) {
      // An Envoy's local cluster for zone-aware routing (local-cluster.ts).
      if (isLocalClusterRequest(name, client)) return localClusterResource(mesh, client);
      const service = mesh.get(name);
      if (!service) return undefined;
      // A load-aware service's weights are per client node: such a service is sent as a full CLA, not as LEDS pieces.
      const byCollection = client.leds === true && !service.load ? leds?.lookup(service, client) : undefined;
      if (byCollection) return byCollection;
      const entry = claCache.lookup(service, client);
      let r = wrapped.get(entry);
      if (!r) wrapped.set(entry, (r = makeResource(entry.service, ENDPOINT_TYPE, entry.bytes)));
      if (kindOf(client) !== 'envoy') return r;
      // Only when some endpoint is not routable do Envoy's bytes differ from the shared ones.
      if (!hasUnroutable(service)) return r;
      // `count`: unhealthy endpoints in their priority, as on LEDS; a locality policy's CLA, and a load-aware
      // service's while it has weights, park them (leds-cla.ts).
      if (unhealthyOf(service.spec) === 'count' && !hasPolicy(service.spec.loadBalancing.policy) && !service.load)
        return counted.lookup(service, client);
      const parked = parkedGroups(entry.cla, service.parked());
      if (parked.length === 0) return r;
      const key = `${r.hash}\n${parkedSignature(parked)}`;
      const hit = withParked.get(entry);
      if (hit?.key === key) return hit.resource;
      const base = flatten(entry.bytes);
      const tail = encodeParkedGroups(parked);
      const bytes = new Uint8Array(base.length + tail.length);
      bytes.set(base);
      bytes.set(tail, base.length);
      const resource = makeResource(entry.service, ENDPOINT_TYPE, bytes);
      withParked.set(entry, { key, resource });
      return resource;
    },
    // Any service may be some Envoy's own: its local cluster is resolved again (and sent if its bytes changed).
    touchedBy: (services) => (services.size > 0 ? [...servicesAsNames(services), LOCAL_CLUSTER] : []),
    forget: (service) => {
      claCache.forget(service);
      leds?.forget(service);
      counted.forget(service);
    },
  };
}

/** Per service state, at its generation: whether some endpoint is not routable (one pass per change). */
const unroutable = new WeakMap<ServiceState, { generation: number; has: boolean }>();

function hasUnroutable(service: ServiceState): boolean {
  const held = unroutable.get(service);
  if (held?.generation === service.generation) return held.has;
  let has = false;
  for (const e of service.endpoints.values())
    if (!isRoutable(e)) {
      has = true;
      break;
    }
  unroutable.set(service, { generation: service.generation, has });
  return has;
}
