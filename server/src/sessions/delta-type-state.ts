/**
 * What a delta stream keeps per resource type (delta-session.ts): the names subscribed, the versions the client
 * holds and acknowledged, and the responses not yet acknowledged; and the record of a response as it is sent.
 */
import type { DeltaResource } from '../wire/envelope.js';
import type { NackRecord, ResourceStatus, SentStamp } from './client-status.js';
import type { GlobResponse, GlobStep, HeldGlobs } from './delta-collections.js';

/** Responses not yet acknowledged that an ACK may still name, per type (older ones are forgotten). */
export const MAX_OUTSTANDING = 16;

export interface SentResponse {
  readonly systemVersion: string;
  /** name → version sent, or null for a name sent as removed. */
  readonly versions: ReadonlyMap<string, string | null>;
  /** The collection steps sent (each glob with the snapshot it brought the client to). */
  readonly globs?: readonly GlobStep[];
}

export interface DeltaTypeState {
  wildcard: boolean;
  names: Set<string>;
  /** name → version the client holds: what it was sent, or what it said it held on reconnect. */
  held: Map<string, string>;
  /** Subscribed names reported as not existing; reported again only after they existed. */
  absent: Set<string>;
  /** name → version the client acknowledged. */
  acked: Map<string, string>;
  /**
   * name → the response that sent the version held (CSDS last_updated); names
   * the first response sent and that never changed since have `firstSent`, so
   * a stream keeps entries only for what changed after it.
   */
  sentIn: Map<string, SentStamp>;
  firstSent?: SentStamp;
  /** Names of NACKed responses; cleared for each name by a later ACK of it. */
  nacked: Set<string>;
  /** name → the version the client refused when sent on its own: not sent again until it changes. */
  refused?: Map<string, string>;
  /**
   * After a NACK of a response that carried several names or globs: the groups to send again one per
   * response (halves, then halves of a NACKed half), so a bad resource keeps only itself from the client.
   */
  retry?: string[][];
  outstanding: Map<string, SentResponse>;
  systemVersionSent: string;
  nonceSent: string;
  systemVersionAcked: string;
  lastNack?: NackRecord;
  /** The collections held, for a type that has them. */
  globs?: HeldGlobs;
}

export function newState(): DeltaTypeState {
  return {
    wildcard: false,
    names: new Set(),
    held: new Map(),
    absent: new Set(),
    acked: new Map(),
    sentIn: new Map(),
    nacked: new Set(),
    outstanding: new Map(),
    systemVersionSent: '',
    nonceSent: '',
    systemVersionAcked: '',
  };
}

export function forget(state: DeltaTypeState, name: string): void {
  state.globs?.forget(name);
  state.held.delete(name);
  state.acked.delete(name);
  state.sentIn.delete(name);
  state.nacked.delete(name);
  state.refused?.delete(name);
}

/** The halves a NACKed response's names are sent again in (bisect: one response each). */
export function halves(units: readonly string[]): string[][] {
  const mid = Math.ceil(units.length / 2);
  return [units.slice(0, mid), units.slice(mid)].filter((h) => h.length > 0);
}

export function resourceStatuses(s: DeltaTypeState): ResourceStatus[] {
  const out: ResourceStatus[] = [];
  for (const [name, version] of s.held) {
    const state = s.nacked.has(name) ? 'NACKED' : s.acked.get(name) === version ? 'ACKED' : 'REQUESTED';
    // NACKED: the version refused (CSDS error_state), while the client still holds the one it acknowledged.
    const shown = state === 'NACKED' ? (s.refused?.get(name) ?? version) : version;
    out.push({ name, version: shown, state, acked: s.acked.get(name) ?? '' });
  }
  for (const name of s.names) {
    const glob = s.globs?.status(name);
    if (glob) out.push({ name, ...glob });
    if (s.held.has(name) || glob) continue;
    if (s.nacked.has(name)) out.push(nackedNone(s, name));
    else out.push({ name, version: '', state: s.absent.has(name) ? 'DOES_NOT_EXIST' : 'REQUESTED' });
  }
  // Wildcard: a name the client refused and never held (rolled back to nothing) is still reported.
  if (s.wildcard) for (const n of s.nacked) if (!s.held.has(n) && !s.names.has(n)) out.push(nackedNone(s, n));
  return out.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

/** A name NACKED that the client holds no version of: the version it refused, if refused on its own. */
function nackedNone(s: DeltaTypeState, name: string): ResourceStatus {
  return { name, version: s.refused?.get(name) ?? '', state: 'NACKED', acked: '' };
}

/** A response about to go out, as the stream records it: what an ACK or NACK of its nonce will settle. */
export interface Sending {
  readonly nonce: string;
  readonly nonces: number;
  readonly at: number;
  readonly systemVersion: string;
  readonly versions: ReadonlyMap<string, string | null>;
  readonly resources: readonly DeltaResource[];
  readonly removed: readonly string[];
  readonly globs: GlobResponse | undefined;
}

/** Records a response as sent: its nonce, what it sent when (CSDS), and what it leaves outstanding. */
export function recordSent(state: DeltaTypeState, s: Sending): void {
  state.nonceSent = s.nonce;
  const stamp: SentStamp = { nonce: s.nonces, at: s.at };
  if (state.firstSent) for (const r of s.resources) state.sentIn.set(r.name, stamp);
  else if (s.resources.length > 0) state.firstSent = stamp;
  for (const n of s.removed) state.sentIn.delete(n);
  state.systemVersionSent = s.systemVersion;
  const globs = s.globs ? { globs: s.globs.steps } : {};
  state.outstanding.set(s.nonce, { systemVersion: s.systemVersion, versions: s.versions, ...globs });
  if (state.outstanding.size > MAX_OUTSTANDING) state.outstanding.delete(state.outstanding.keys().next().value!);
}
