/**
 * What the push pipeline needs from a protocol session (SotW or delta): apply
 * a client's request, bring the client up to date after a change, say whether
 * a change concerns it, and report its state.
 */
import type { ClientStatus } from './client-status.js';

/** Encoded responses shared by streams, keyed by everything that makes their bytes (a Map will do). */
export interface SharedResponses {
  get(key: string): Buffer | undefined;
  set(key: string, bytes: Buffer): unknown;
}

/** Names touched by a change, per type URL. */
export type TouchedNames = ReadonlyMap<string, ReadonlySet<string>>;

export interface OutgoingResponse {
  readonly typeUrl: string;
  /** SotW: the response's version_info; delta: its system_version_info (the same hash). */
  readonly version: string;
  readonly nonce: string;
  /** Resources carried (delta: not counting removals). */
  readonly resources: number;
  readonly bytes: Buffer;
}

export type RequestOutcome =
  | { readonly kind: 'initial' | 'ack' | 'subscribe'; readonly typeUrl: string }
  | { readonly kind: 'nack'; readonly typeUrl: string; readonly detail: string }
  | { readonly kind: 'stale'; readonly typeUrl: string; readonly nonce: string };

export interface Session<Request> {
  readonly id: number;
  readonly nodeId: string;
  /** `shared`: identical responses made while handling requests of other streams, reused as they are. */
  handle(req: Request, shared?: SharedResponses): { outcome: RequestOutcome; responses: OutgoingResponse[] };
  refresh(shared?: SharedResponses): OutgoingResponse[];
  concerns(touched: TouchedNames): boolean;
  status(): ClientStatus;
}

/** Ranks after every served type: a type URL the server does not know. */
export const UNKNOWN_RANK = 1000;
