/**
 * The state-of-the-world protocol for one ADS stream, without gRPC: what the
 * client subscribed to, what it was sent and what it acknowledged, per type.
 *
 * - ACK or NACK is decided by error_detail alone.
 * - A request whose response_nonce is not the last one sent for its type is
 *   stale and ignored, but for a NACK that comes late (sotw-nack.ts).
 * - After a NACK the client holds what it last acknowledged. LDS, CDS and
 *   the tree type send the full state, so their next response is complete.
 *   For RDS and EDS (only what changed) the names the NACKed response
 *   carried are taken as not held and sent again in halves, one response
 *   each, each waiting for the answer to the one before; a name NACKed on
 *   its own is not sent again until it changes.
 * - Versions are content hashes, so unchanged content sends nothing; that holds
 *   across streams too: a first request whose version_info is the version the
 *   server would send now (a client reconnecting, to this replica or another)
 *   is answered with nothing until something changes.
 * - LDS, CDS and LocalityTree responses carry the full subscribed state; RDS and EDS carry
 *   only the resources whose bytes the client does not already hold.
 */
import { versionOf, versionText, type Resource } from '../resources/resource.js';
import type { ResourceType } from '../resources/resource-type.js';
import { encodeDiscoveryResponse } from '../wire/envelope.js';
import type { DiscoveryRequest } from '../wire/request.js';
import type { NackRecord, ResourceStatus, SentStamp } from './client-status.js';

import {
  overLimits,
  scopeOf,
  type OutgoingResponse,
  type Received,
  type RequestOutcome,
  type Session,
  type SharedResponses,
  type TouchedNames,
} from './session.js';
import {
  answered,
  isPending,
  keepPending,
  keepUnanswered,
  rollBack,
  settleStale,
  type Unanswered,
} from './sotw-nack.js';
import { hashesOf, nextSent, sameSet } from './sotw-held.js';
import { StreamSession, type TypeVersions } from './stream-session.js';
import { wireNonce } from './wire-nonce.js';

export type { OutgoingResponse, RequestOutcome, SharedResponses, TouchedNames } from './session.js';

interface TypeState {
  wildcard: boolean;
  names: Set<string>;
  /** name → hash of the bytes last sent. */
  sent: Map<string, string | number>;
  versionSent: string;
  nonceSent: string;
  versionAcked: string;
  /** The version a first request said the client already holds (from an earlier stream), until answered. */
  versionHeld?: string;
  /** Names dropped from `sent` for Envoy's warming: the next response goes out even if the version is unchanged. */
  rewarm: boolean;
  lastNack?: NackRecord;
  /**
   * name → the response that brought the content the client holds (CSDS: its
   * version, when, acknowledged). Names the first such response brought and
   * that never changed since are not listed: they have `base`, so a stream
   * keeps entries only for what changed after its first response.
   */
  since: Map<string, Stamp>;
  base?: Stamp;
  /** name → the last acknowledged response that brought it, while a newer one is unacknowledged or NACKed. */
  kept: Map<string, Stamp>;
  /** The nonce of the last response of this type the client acknowledged (0: none). */
  ackedNonce: number;
  /** The stamp of the last response sent, marked when it is NACKed. */
  lastStamp?: Stamp;
  /** RDS, EDS: the names the last response carried, until it is answered. */
  carried: readonly string[] | undefined;
  /** Names NACKed and not acknowledged since (made at the first NACK: most streams never see one). */
  nacked?: Set<string>;
  /** name → hash the client refused when sent on its own: not sent again until it changes. */
  refused?: Map<string, string | number>;
  /** Groups of a NACKed response's names still to send again, one response each (halves). */
  retry?: string[][];
  /** Older responses not answered yet, for a NACK that comes late (sotw-nack.ts). */
  unanswered?: Unanswered[] | undefined;
  /** Nonces sent before `nonceSent` and not answered yet: a new wire nonce differs from them (wire-nonce.ts). */
  pending?: string[] | undefined;
}

/** One response, shared by the resources whose current content it brought. */
interface Stamp extends SentStamp {
  readonly version: string;
  nacked: boolean;
}

/** A reconnecting client's copy, taken as sent and acknowledged. */
const HELD_NONCE = 0;

function stampOf(state: TypeState, name: string): Stamp | undefined {
  return state.since.get(name) ?? state.base;
}

function isAcked(state: TypeState, stamp: Stamp | undefined): boolean {
  return stamp !== undefined && !stamp.nacked && stamp.nonce <= state.ackedNonce;
}

export class SotwSession extends StreamSession<TypeState> implements Session<DiscoveryRequest> {
  /** Applies one request; returns what it was and whether it calls for a response. */
  receive(req: DiscoveryRequest): Received {
    const ignored = this.admit(req);
    if (ignored) return ignored;
    const typeUrl = req.typeUrl;
    const refused = overLimits(req.resourceNames, req.resourceNames.length, this.limits);
    if (refused) return { outcome: { kind: 'rejected', typeUrl, detail: `resource_names: ${refused}` } };
    let state = this.subscriptions.get(typeUrl);
    if (state && req.responseNonce !== '' && req.responseNonce !== state.nonceSent) {
      answered(state, req.responseNonce);
      // A NACK of a response answered late, after a newer one went out: what it carried is not held either.
      const names = settleStale(state, req.responseNonce, req.errorDetail !== undefined);
      if (!names || !req.errorDetail) return { outcome: { kind: 'stale', typeUrl, nonce: req.responseNonce } };
      const detail = req.errorDetail.message;
      state.lastNack = { version: '', nonce: req.responseNonce, detail, at: new Date().toISOString() };
      return { outcome: { kind: 'nack', typeUrl, detail, names }, answer: false };
    }
    let outcome: RequestOutcome;
    if (!state) {
      state = {
        wildcard: false,
        names: new Set(),
        sent: new Map(),
        versionSent: '',
        nonceSent: '',
        versionAcked: '',
        rewarm: false,
        since: new Map(),
        kept: new Map(),
        ackedNonce: 0,
        // Set and cleared once per response: assigned, never deleted (a deleted property slows the object).
        carried: undefined,
      };
      // A version held is taken at its word, unless warming owes this type a resource (see `owe`).
      const owed = this.takeOwed(typeUrl);
      if (req.versionInfo !== '' && !owed?.size) state.versionHeld = req.versionInfo;
      this.subscriptions.set(typeUrl, state);
      outcome = { kind: 'initial', typeUrl };
    } else if (req.errorDetail && req.responseNonce !== '') {
      const detail = req.errorDetail.message;
      state.lastNack = { version: state.versionSent, nonce: state.nonceSent, detail, at: new Date().toISOString() };
      if (state.lastStamp) state.lastStamp.nacked = true;
      state.pending = undefined;
      outcome = { kind: 'nack', typeUrl, detail, names: rollBack(state) };
    } else if (req.responseNonce !== '') {
      state.versionAcked = req.versionInfo;
      // The response matched is the last one sent: its stamp, not the wire nonce, orders it.
      this.acknowledged(state, state.lastStamp?.nonce ?? HELD_NONCE);
      if (state.nacked) for (const n of state.carried ?? []) state.nacked.delete(n);
      state.carried = undefined;
      state.unanswered = undefined;
      state.pending = undefined;
      outcome = { kind: 'ack', typeUrl };
    } else {
      outcome = { kind: 'subscribe', typeUrl };
    }
    const before = state.names;
    const wildcardBefore = state.wildcard;
    const added = this.subscribe(state, typeUrl, req.resourceNames, outcome.kind === 'initial');
    // The common case, one per push per stream: an ACK that leaves the subscription as it was. Changes
    // since the last response are already on their way (every change schedules a push), so there is
    // nothing to resolve. Unless a resource of this type is owed for warming: then this may be Envoy's
    // re-request (same names, version and nonce, sent when an updated Cluster or Listener adds its
    // watch: GrpcMuxImpl::addWatch → queueDiscoveryRequest), answered as istiod's "AlwaysRespond" does.
    if (outcome.kind === 'ack' && state.wildcard === wildcardBefore && sameSet(before, state.names) && !state.rewarm) {
      return { outcome };
    }
    return { outcome, answer: outcome.kind === 'initial' || outcome.kind === 'subscribe' || added };
  }

  /**
   * The response that brings one type up to date. Streams answered with one
   * `shared` map (one push to many streams) share the encoding of identical
   * responses: same type, version, nonce and resources.
   */
  respond(typeUrl: string, mustAnswer: boolean, shared?: SharedResponses): OutgoingResponse | undefined {
    const state = this.subscriptions.get(typeUrl);
    return state ? this.respondType(typeUrl, state, mustAnswer, shared) : undefined;
  }

  /** Does this stream hold or want any of these names? */
  concerns(touched: TouchedNames): boolean {
    for (const [typeUrl, state] of this.subscriptions) {
      const names = touched.get(typeUrl);
      if (!names || names.size === 0) continue;
      if (state.wildcard) return true;
      for (const n of names) if (state.names.has(n)) return true;
    }
    return false;
  }

  protected readonly protocol = 'sotw' as const;

  protected versions(s: TypeState, typeUrl: string): TypeVersions {
    return { sent: s.versionSent, acked: s.versionAcked, resources: this.resourceStatuses(s, typeUrl) };
  }

  /** Per resource: the response that brought its current content, and whether that one was acknowledged. */
  private resourceStatuses(s: TypeState, typeUrl: string): ResourceStatus[] {
    const out: ResourceStatus[] = [];
    for (const [name, hash] of s.sent) {
      const stamp = stampOf(s, name);
      const state = stamp?.nacked || s.nacked?.has(name) ? 'NACKED' : isAcked(s, stamp) ? 'ACKED' : 'REQUESTED';
      const acked = state === 'ACKED' ? stamp!.version : (s.kept.get(name)?.version ?? '');
      out.push({
        name,
        version: stamp?.version ?? '',
        state,
        acked,
        ...(stamp ? { sentAt: new Date(stamp.at).toISOString() } : {}),
        body: this.bodyOf(typeUrl, name, versionText(hash)),
      });
    }
    for (const name of s.names) {
      if (s.sent.has(name)) continue;
      // NACKED and not held: the version_info of the response refused (CSDS error_state).
      if (s.nacked?.has(name)) out.push({ name, version: s.lastNack?.version ?? '', state: 'NACKED', acked: '' });
      else out.push({ name, version: '', state: s.nonceSent === '' ? 'REQUESTED' : 'DOES_NOT_EXIST' });
    }
    return out.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  /** An ACK of the response stamped `nonce`: what it and every earlier response brought is acknowledged. */
  private acknowledged(state: TypeState, nonce: number): void {
    state.ackedNonce = Math.max(state.ackedNonce, nonce);
    for (const name of state.kept.keys()) if (isAcked(state, stampOf(state, name))) state.kept.delete(name);
  }

  /** Records which resources response `stamp` brought (new content), and forgets those no longer held. */
  private stampSent(
    state: TypeState,
    changed: readonly string[],
    current: ReadonlyMap<string, Resource>,
    stamp: Stamp,
  ): void {
    for (const name of state.since.keys()) {
      if (current.has(name)) continue;
      state.since.delete(name);
      state.kept.delete(name);
    }
    if (!state.base) {
      if (changed.length > 0) state.base = stamp;
      return;
    }
    for (const name of changed) {
      const old = stampOf(state, name);
      if (isAcked(state, old)) state.kept.set(name, old!);
      state.since.set(name, stamp);
    }
  }

  protected resend(typeUrl: string, names: readonly string[]): boolean {
    const state = this.subscriptions.get(typeUrl);
    if (!state) return false;
    for (const n of names) if ((state.wildcard || state.names.has(n)) && state.sent.delete(n)) state.rewarm = true;
    return state.rewarm;
  }

  /** Returns whether a name not held before was added. */
  private subscribe(state: TypeState, typeUrl: string, names: readonly string[], first: boolean): boolean {
    const explicit = names.filter((n) => n !== '*');
    // Legacy wildcard: an empty list on the first LDS/CDS request, kept while the list stays empty.
    const legacy = names.length === 0 && (first || state.wildcard) && this.types.get(typeUrl)?.fullStateInSotw === true;
    state.wildcard = names.includes('*') || legacy;
    let added = false;
    const next = new Set(explicit);
    for (const n of next) if (!state.names.has(n)) added = true;
    for (const n of state.names) if (!next.has(n)) state.sent.delete(n);
    const demand = this.types.get(typeUrl)?.demandScoped ? this.placement.demand : undefined;
    if (demand) {
      // Lazy xDS: a name asked for is in use; a name dropped starts its unused timeout.
      const fresh = [...next].filter((n) => !state.names.has(n));
      demand.use(fresh);
      if (fresh.length > 0) this.demandGrew(typeUrl);
      demand.release(
        [...state.names].filter((n) => !next.has(n)),
        Date.now(),
      );
    }
    state.names = next;
    return added;
  }

  private respondType(
    typeUrl: string,
    state: TypeState,
    mustAnswer: boolean,
    shared?: SharedResponses,
  ): OutgoingResponse | undefined {
    const type = this.types.get(typeUrl);
    const current = type ? this.resolveAll(type, state) : new Map<string, Resource>();
    const version = versionOf(current);
    const held = state.versionHeld;
    delete state.versionHeld;
    if (held === version && state.nonceSent === '') {
      // A reconnecting client already holds exactly this: nothing to send, as if it had been sent and ACKed.
      state.sent = hashesOf(current);
      state.versionSent = version;
      state.versionAcked = version;
      this.stampSent(state, [...current.keys()], current, {
        version,
        nonce: HELD_NONCE,
        at: Date.now(),
        nacked: false,
      });
      return undefined;
    }
    // A retry after a NACK waits for the answer to the response before (see the header).
    if (state.retry?.length && state.carried) return undefined;
    if (version === state.versionSent && !mustAnswer && !state.rewarm) return undefined;
    const group = type?.fullStateInSotw ? undefined : state.retry?.shift();
    if (state.retry?.length === 0) delete state.retry;
    const only = group ? new Set(group) : undefined;
    // After a retry group, what else changed meanwhile goes in the next response.
    state.rewarm = only !== undefined;
    let resources: Resource[];
    if (type?.fullStateInSotw) {
      resources = [...current.values()];
    } else {
      resources = [...current.values()].filter(
        (r) =>
          state.sent.get(r.name) !== r.hash && state.refused?.get(r.name) !== r.hash && (!only || only.has(r.name)),
      );
      if (resources.length === 0 && !mustAnswer) {
        // Only removals: the client drops those with their parent resource.
        state.sent = nextSent(state, current, resources);
        state.versionSent = version;
        this.stampSent(state, [], current, { version, nonce: HELD_NONCE, at: 0, nacked: false });
        return only ? this.respondType(typeUrl, state, mustAnswer, shared) : undefined;
      }
      if (state.carried) keepUnanswered(state, state.nonceSent, state.carried);
      state.carried = resources.map((r) => r.name);
    }
    const changed: string[] = [];
    for (const r of resources) if (state.sent.get(r.name) !== r.hash) changed.push(r.name);
    if (type?.warming) this.warmAfter(typeUrl, changed);
    state.sent = type?.fullStateInSotw ? hashesOf(current) : nextSent(state, current, resources);
    state.versionSent = version;
    // The version names the content of `current`; the names name which of it is sent.
    const content = `${typeUrl}\n${version}\n${resources.map((r) => r.name).join('\n')}`;
    const sequence = ++this.nonces;
    const nonce = wireNonce(content, sequence, (n) => n === state.nonceSent || isPending(state, n));
    if (state.nonceSent !== '') keepPending(state, state.nonceSent);
    state.nonceSent = nonce;
    state.lastStamp = { version, nonce: sequence, at: Date.now(), nacked: false };
    this.stampSent(state, changed, current, state.lastStamp);
    const encode = (): Buffer =>
      encodeDiscoveryResponse({ versionInfo: version, typeUrl, nonce, resources: resources.map((r) => r.any) });
    let bytes: Buffer;
    if (shared) {
      const key = `${content}\n${nonce}`;
      const held = shared.get(key);
      bytes = held ?? encode();
      // What the version covers: the names subscribed (a wildcard's, all of the type's).
      if (!held) shared.set(key, bytes, scopeOf(typeUrl, state.wildcard ? undefined : state.names));
    } else bytes = encode();
    return { typeUrl, version, nonce: state.nonceSent, names: resources.map((r) => r.name), bytes };
  }

  private resolveAll(type: ResourceType, state: TypeState): Map<string, Resource> {
    const current = new Map<string, Resource>();
    const demand = type.demandScoped ? this.placement.demand : undefined;
    const all = state.wildcard ? type.names() : [];
    const wanted = state.wildcard
      ? new Set([...(demand ? demand.filter(all, Date.now()) : all), ...state.names])
      : state.names;
    for (const name of wanted) {
      const r = type.resolve(name, this.placement);
      if (r) current.set(name, r);
    }
    return current;
  }
}
