/**
 * The resource types as one client may see them: a resource of a service
 * its read grant does not cover does not exist for it. Sessions then answer
 * it as absent on both protocols (left out of SotW responses and wildcards,
 * `removed_resources` on delta), for every type, and never encode it for
 * this client. The underlying types stay shared: what is resolved for one
 * client is the same resource, with the same bytes, as for any other.
 */
import { parseIncarnatedName } from '../resources/incarnations.js';
import { parseLedsName } from '../resources/endpoint/leds-names.js';
import type { Collections, ResourceType, ResourceTypes } from '../resources/resource-type.js';
import { CLUSTER_TYPE, LEDS_TYPE } from '../resources/type-urls.js';
import type { ReadGrant } from './read-access.js';

/** The service a resource name of this type belongs to (names are service names, but for these two). */
export function serviceOfName(typeUrl: string, name: string): string | undefined {
  if (typeUrl === CLUSTER_TYPE) return parseIncarnatedName(name).service;
  if (typeUrl === LEDS_TYPE) return parseLedsName(name)?.service;
  return name;
}

export function readableResources(types: ResourceTypes, grant: ReadGrant): ResourceTypes {
  if (grant.all) return types;
  const views = new Map<string, ResourceType>();
  return {
    get(typeUrl) {
      const type = types.get(typeUrl);
      if (!type) return undefined;
      let view = views.get(typeUrl);
      if (!view) views.set(typeUrl, (view = readableType(type, grant)));
      return view;
    },
    ...(types.demandFor ? { demandFor: (node) => types.demandFor!(node) } : {}),
    ...(types.servesLeds ? { servesLeds: () => types.servesLeds!() } : {}),
  };
}

function readableType(type: ResourceType, grant: ReadGrant): ResourceType {
  const readable = (name: string): boolean => {
    const service = serviceOfName(type.typeUrl, name);
    return service !== undefined && grant.service(service);
  };
  return {
    typeUrl: type.typeUrl,
    shortName: type.shortName,
    fullStateInSotw: type.fullStateInSotw,
    pushRank: type.pushRank,
    ...(type.demandScoped !== undefined ? { demandScoped: type.demandScoped } : {}),
    names: () => type.names().filter(readable),
    resolve: (name, client) => (readable(name) ? type.resolve(name, client) : undefined),
    touchedBy: (services) => type.touchedBy(services),
    forget: (service) => type.forget(service),
    ...(type.collections ? { collections: readableCollections(type.collections, readable) } : {}),
  };
}

/** A collection the grant does not cover has no snapshot; which names are globs, and what changed, stay as they are. */
function readableCollections(collections: Collections, readable: (name: string) => boolean): Collections {
  return {
    collection: (glob) => (readable(glob) ? collections.collection(glob) : undefined),
    isCollection: (name) => collections.isCollection(name),
    collectionChanges: (since) => collections.collectionChanges(since),
  };
}
