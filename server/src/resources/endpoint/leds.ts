/**
 * LEDS: envoy.config.endpoint.v3.LbEndpoint resources, one per endpoint,
 * grouped in one xDS collection per locality-tree leaf (leds-names.ts).
 * Delta streams subscribe to a collection's glob (`…/*`) and get its members;
 * a single member may be subscribed to by name too. A SotW request for this
 * type is answered like any other per-name type: member names resolve, a glob
 * resolves to nothing (SotW has no collections), so it gets an empty response.
 */
import type { Mesh } from '../../domain/mesh.js';
import { LedsCollections } from './leds-collections.js';
import { isCollectionName } from './leds-names.js';
import type { ResourceType } from '../resource-type.js';
import { LEDS_TYPE } from '../type-urls.js';

export function ledsType(mesh: Mesh, collections = new LedsCollections(mesh)): ResourceType {
  return {
    typeUrl: LEDS_TYPE,
    shortName: 'LEDS',
    fullStateInSotw: false,
    // Right after the CLAs that name the collections, before listeners and routes.
    pushRank: 1.5,
    // No wildcard: members are reached through their collections.
    names: () => [],
    resolve: (name) => collections.member(name),
    collections: {
      collection: (glob) => collections.collection(glob),
      collectionChanges: (since) => collections.changes(since),
      isCollection: isCollectionName,
    },
    touchedBy: (services) => collections.touchedBy(services),
    forget: (service) => collections.forget(service),
  };
}
