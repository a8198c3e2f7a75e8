/**
 * ClusterLoadAssignment: depends on where the client is, so it comes from the
 * locality-keyed CLA cache and is wrapped in an Any once per cache entry.
 */
import { ClaCache, type ClaEntry } from '../domain/cla-cache.js';
import type { Mesh } from '../domain/mesh.js';
import type { Bytes } from '../wire/rope.js';
import { encodeClaBytes } from './endpoint-codec.js';
import { makeResource, type Resource } from './resource.js';
import { servicesAsNames, type ResourceType } from './resource-type.js';
import { ENDPOINT_TYPE } from './type-urls.js';

/** The server's CLA cache: entries are ropes that follow the tree (or contiguous bytes). */
export type ServerClaCache = ClaCache<Bytes>;

/** A CLA cache with the server's encoder. */
export function serverClaCache(): ServerClaCache {
  return new ClaCache<Bytes>(encodeClaBytes, { liveSpans: true });
}

export function endpointType(mesh: Mesh, claCache: ServerClaCache): ResourceType {
  const wrapped = new WeakMap<ClaEntry<Bytes>, Resource>();
  return {
    typeUrl: ENDPOINT_TYPE,
    shortName: 'EDS',
    fullStateInSotw: false,
    pushRank: 1,
    names: () => mesh.list().map((s) => s.name),
    resolve(name, client) {
      const service = mesh.get(name);
      if (!service) return undefined;
      const entry = claCache.lookup(service, client);
      let r = wrapped.get(entry);
      if (!r) wrapped.set(entry, (r = makeResource(entry.service, ENDPOINT_TYPE, entry.bytes)));
      return r;
    },
    touchedBy: servicesAsNames,
    forget: (service) => claCache.forget(service),
  };
}
