/**
 * What the push pipeline needs from a protocol session (SotW or delta): take
 * a client's request, answer a type when the stream can take a response,
 * say which types a push walks and whether a change concerns the client, and
 * report its state. A session never writes: the pipeline decides when.
 */
import type { ClientStatus } from './client-status.js';

/** Encoded responses shared by streams, keyed by everything that makes their bytes (a Map will do). */
export interface SharedResponses {
  get(key: string): Buffer | undefined;
  /** `scope`: what the response's content depends on, so a change that touches none of it keeps it. */
  set(key: string, bytes: Buffer, scope?: SharedScope): unknown;
}

/** A response's type and the names whose content it carries (all of the type's, when not listed). */
export interface SharedScope {
  readonly typeUrl: string;
  readonly names?: readonly string[] | undefined;
}

/** The most names, and characters in them, a held response's scope lists: past either, it covers its whole type. */
export const SCOPE_MAX_NAMES = 64;
export const SCOPE_MAX_CHARS = 4096;

/**
 * The scope of a response to a stream subscribed to `names` (undefined: a wildcard). A response outlives
 * its stream in the shared cache, so a scope lists names only while they are few and short: a long list
 * would keep a closed stream's subscription alive (a hoarder's 10,000 names of 1,000 characters) and cost
 * a copy per response. Past the bounds it covers the whole type: any change to the type lets it go.
 */
export function scopeOf(typeUrl: string, names: ReadonlySet<string> | undefined): SharedScope {
  if (!names || names.size > SCOPE_MAX_NAMES) return { typeUrl };
  let chars = 0;
  for (const n of names) if ((chars += n.length) > SCOPE_MAX_CHARS) return { typeUrl };
  return { typeUrl, names: [...names] };
}

/** Names touched by a change, per type URL. */
export type TouchedNames = ReadonlyMap<string, ReadonlySet<string>>;

export interface OutgoingResponse {
  readonly typeUrl: string;
  /** SotW: the response's version_info; delta: its system_version_info (the same hash). */
  readonly version: string;
  readonly nonce: string;
  /** Names of the resources carried (delta: not counting removals). */
  readonly names: readonly string[];
  /** How many names, when known without listing them (`names.length` otherwise). */
  readonly count?: number;
  readonly bytes: Buffer;
}

export type RequestOutcome =
  | { readonly kind: 'initial' | 'ack' | 'subscribe'; readonly typeUrl: string }
  /** `names`: what the NACKed response carried (resource names, and LEDS globs), when the stream knows. */
  | { readonly kind: 'nack'; readonly typeUrl: string; readonly detail: string; readonly names?: readonly string[] }
  | { readonly kind: 'stale'; readonly typeUrl: string; readonly nonce: string }
  /** A type URL this server does not serve (or none): no state is kept for it. */
  | { readonly kind: 'ignored'; readonly typeUrl: string; readonly detail: string }
  /** Over a limit: the stream is ended with this detail. */
  | { readonly kind: 'rejected'; readonly typeUrl: string; readonly detail: string };

export interface Received {
  readonly outcome: RequestOutcome;
  /** Set when the request calls for a response of its type: true when one is due even if nothing changed. */
  readonly answer?: boolean;
}

export interface Session<Request> {
  readonly id: number;
  readonly nodeId: string;
  receive(req: Request): Received;
  /** The response that brings this type up to date now, if any (`mustAnswer`: even if nothing changed). */
  respond(typeUrl: string, mustAnswer: boolean, shared?: SharedResponses): OutgoingResponse | undefined;
  /** Subscribed types in push order: clusters and their endpoints before the listeners and routes that use them. */
  pushOrder(): string[];
  /**
   * Streams with equal keys are likely to be sent the same bytes (the same protocol, and the same tree
   * nodes or placement): the push window lets them through back to back. A hint for ordering only:
   * streams with one key may still differ.
   */
  shareKey?(): string;
  concerns(touched: TouchedNames): boolean;
  /** `maxNames`: at most this many names and resources listed per type. */
  status(maxNames?: number): ClientStatus;
  /** The stream ended: what it had subscribed to by name is no longer in use (lazy xDS). */
  closed?(): void;
  /**
   * Types to bring up to date next, whether or not a push is under way (Envoy's warming after a
   * Cluster or Listener update, a demand set grown by an on-demand name); each is handed out once.
   */
  takeDue?(): readonly string[];
}

/** What one stream may hold: bounds memory whatever a client sends. */
export interface SessionLimits {
  /** Names one stream may subscribe to per type. */
  readonly maxNamesPerType: number;
  /** Characters in one resource name. */
  readonly maxNameLength: number;
}

export const DEFAULT_LIMITS: SessionLimits = { maxNamesPerType: 10_000, maxNameLength: 1_024 };

/** Why a list of names is refused, or undefined when it is within the limits. */
export function overLimits(names: readonly string[], held: number, limits: SessionLimits): string | undefined {
  if (held > limits.maxNamesPerType) {
    return `subscribes to ${held} names of one type; the limit is ${limits.maxNamesPerType} per stream`;
  }
  for (const n of names) {
    if (n.length > limits.maxNameLength) {
      return `resource name of ${n.length} characters ("${n.slice(0, 40)}…"); the limit is ${limits.maxNameLength}`;
    }
  }
  return undefined;
}

/** Why a type URL gets no state, or undefined when the server serves it. */
export function unservedType(typeUrl: string, served: boolean): string | undefined {
  if (typeUrl === '') return 'type_url is empty: every ADS request must name its type';
  return served ? undefined : `type ${typeUrl} is not served here (ignored, no state kept)`;
}

/** Ranks after every served type. */
export const UNKNOWN_RANK = 1000;

/** Subscribed type URLs in push order. */
export function inPushOrder(typeUrls: Iterable<string>, rank: (typeUrl: string) => number | undefined): string[] {
  return [...typeUrls].sort((a, b) => (rank(a) ?? UNKNOWN_RANK) - (rank(b) ?? UNKNOWN_RANK));
}

/** Takes a request and answers it at once (tests, and callers with no transport to wait for). */
export function handleNow<R>(session: Session<R>, req: R): { outcome: RequestOutcome; responses: OutgoingResponse[] } {
  const { outcome, answer } = session.receive(req);
  const r = answer === undefined ? undefined : session.respond(outcome.typeUrl, answer);
  return { outcome, responses: r ? [r] : [] };
}

/** Brings every type up to date at once, in push order. */
export function refreshNow<R>(session: Session<R>, shared?: SharedResponses): OutgoingResponse[] {
  const out: OutgoingResponse[] = [];
  for (const typeUrl of session.pushOrder()) {
    const r = session.respond(typeUrl, false, shared);
    if (r) out.push(r);
  }
  // What the push made due (warming) goes after it, in the order it was made due.
  for (const typeUrl of session.takeDue?.() ?? []) {
    const r = session.respond(typeUrl, false, shared);
    if (r) out.push(r);
  }
  return out;
}
