/**
 * What one xDS resource type knows, in one place: its type URL, how SotW
 * carries it, where it goes in a push, its names, how a name resolves for a
 * client, and which names a change to the mesh touches. Sessions (SotW and
 * delta) see resource types only through this interface and the registry.
 */
import { kindOf, type Client } from '../domain/client.js';
import type { DemandSet } from '../domain/demand.js';
import type { NodeInfo } from '../wire/request.js';
import type { Resource } from './resource.js';

/**
 * What every type has: the small core the sessions and the registry rely on (grpc-js-xds's resource type
 * has five members; this one has the eight a server needs). What only some types do is a capability below.
 */
export interface ResourceTypeCore {
  readonly typeUrl: string;
  /** 'LDS', 'CDS', … for logs and metric labels. */
  readonly shortName: string;
  /** A SotW response carries every subscribed resource, so one left out has been deleted (LDS, CDS). */
  readonly fullStateInSotw: boolean;
  /** Lower is pushed first: clusters and their endpoints before the listeners and routes that use them. */
  readonly pushRank: number;
  /** Every name of this type, for wildcard subscriptions. */
  names(): readonly string[];
  /** The resource as this client sees it, or undefined when it does not exist. */
  resolve(name: string, client: Client): Resource | undefined;
  /** The names of this type that a change to these services may have changed. */
  touchedBy(services: ReadonlySet<string>): Iterable<string>;
  /** Drops what a deleted service left behind. */
  forget(service: string): void;
}

/** Lazy xDS narrows this type's wildcard to the node's demand set (LDS, CDS). */
export interface DemandScoped {
  readonly demandScoped: boolean;
  /**
   * A client that reaches services on demand (Client.onDemand) gets every name of this type, not its demand
   * set: LDS, whose listeners carry the on_demand filter a first request to an unheld service goes through.
   * The type's resolve still leaves out what cannot be fetched on demand.
   */
  readonly wholeOnDemand?: boolean;
}

/** Share groups: the push lets streams sent the same bytes through together (EDS, and proxyless LDS/RDS/CDS). */
export interface SharesResponses {
  /**
   * A key under which clients are sent the same resource for `name` (clients of one tree node get one
   * CLA, wherever below it they are), or undefined when the type cannot tell. Cheap and free of side
   * effects: the push lets streams with the same keys through back to back, so that each distinct
   * response is encoded once. A hint for ordering only: a wrong key costs an encode, never a wrong byte.
   */
  shareGroup(name: string, client: Client): string | undefined;
}

/** Warming: an updated resource of this type waits on resources of other types (CDS, LDS). */
export interface Warms {
  /**
   * Envoy's warming (xds_protocol.rst, "Resource warming"): a resource of this
   * type that is added or updated is built anew on the client and kept warming
   * until it is sent these resources of other types again, even unchanged, in
   * this order (a Cluster: its ClusterLoadAssignment, then on LEDS its
   * collections' members; a Listener: its RouteConfiguration). `client` as in
   * `resolve`: what a resource names may depend on who it is for (the route
   * configuration a listener reads).
   */
  warms(name: string, client: Client): readonly WarmTarget[];
}

/** xDS collections (LEDS): glob names answered with a snapshot of their members. */
export interface Collections {
  /** The current snapshot of a glob name (`…/*`), or undefined when the name is not a collection or has no members. */
  collection(glob: string): CollectionSnapshot | undefined;
  /** Whether a name is a glob this type answers with `collection`. */
  isCollection(name: string): boolean;
  /**
   * Collections whose snapshot changed after `since` (an epoch a previous call
   * returned; -1 for none), so a stream looks only at those; `globs`
   * undefined when `since` is too old to tell (look at every one).
   */
  collectionChanges(since: number): { readonly epoch: number; readonly globs: readonly string[] | undefined };
}

/**
 * A resource type: the core, and whichever capabilities it has, each one object that is there whole or
 * not at all (a type cannot have half of collections). Sessions ask `type.collections`, `type.warming`,
 * `type.shares`; a type without one leaves it out.
 */
export interface ResourceType extends ResourceTypeCore, Partial<DemandScoped> {
  readonly shares?: SharesResponses;
  readonly warming?: Warms;
  readonly collections?: Collections;
}

/** What an updated resource waits for: names of `typeUrl`, and (xDS collections) every glob under `prefix`. */
export interface WarmTarget {
  readonly typeUrl: string;
  readonly names?: readonly string[];
  readonly prefix?: string;
}

/**
 * One collection's members at one moment, immutable and shared by every
 * stream: a new snapshot (new `id`) whenever a member is added, changed or
 * removed, so a stream remembers what it holds as one reference.
 */
export interface CollectionSnapshot {
  readonly name: string;
  /** Unique per snapshot for the process's lifetime. */
  readonly id: number;
  /** Member name → resource, in name order. */
  readonly members: ReadonlyMap<string, Resource>;
  /** A hash of the members' names and versions. */
  readonly version: string;
}

/** Looks a type up by URL; undefined for a type this server does not serve. */
export interface ResourceTypes {
  get(typeUrl: string): ResourceType | undefined;
  /** Lazy xDS: the node's demand set, or undefined for full LDS/CDS. */
  demandFor?(node: NodeInfo | undefined): DemandSet | undefined;
  /** Whether this server serves LEDS (and so may give Envoy on delta collection-based CLAs). */
  servesLeds?(): boolean;
}

/** Resource names are service names for every type Canopy serves today. */
export function servicesAsNames(services: ReadonlySet<string>): Iterable<string> {
  return services;
}

/**
 * The share group of a resource a proxyless client gets by its name alone (its listener, route
 * configuration, plain cluster): its kind. Envoy's depend on more (its outbound mode, its sidecar
 * settings) and are left to the placement.
 */
export function proxylessShareGroup(client: Client): string | undefined {
  const kind = kindOf(client);
  return kind === 'envoy' ? undefined : kind;
}
