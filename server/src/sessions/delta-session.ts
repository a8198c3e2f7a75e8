/**
 * The incremental (delta) protocol for one ADS stream, without gRPC, over the
 * same resource types as SotW:
 *
 * - Each resource's version is its content hash, the one SotW versions are
 *   built from, so versions agree across protocols and replicas.
 * - Subscriptions change by `subscribe`/`unsubscribe` in any request;
 *   wildcard is `*`, or an empty first request for LDS, CDS or the tree type
 *   (legacy wildcard); either ends only when `*` is unsubscribed. Subscribing
 *   a name again (held, or unsubscribed then subscribed) sends it again.
 * - Envoy's warming: an added or updated Cluster or Listener is followed by
 *   its ClusterLoadAssignment (and LEDS collections) or RouteConfiguration,
 *   even unchanged (stream-session.ts `warmAfter`).
 * - A response carries only resources the client does not hold at that
 *   version, plus `removed_resources`: deleted resources it held, and
 *   subscribed names that do not exist (once, until they are created).
 * - `initial_resource_versions` on a reconnect is what the client holds:
 *   matching versions are not sent again.
 * - xDS collections (LEDS): a glob name (`…/*`) brings the collection's
 *   members; see delta-collections.ts.
 * - ACK or NACK by error_detail, for a nonce this stream sent. After a NACK
 *   the client holds what it last acknowledged: what the response carried is
 *   rolled back to that and sent again in halves, and a resource NACKed on
 *   its own is not sent again until it changes (delta-nack.ts). Subscription
 *   changes carried by a NACK, or by a request with a stale nonce, are still
 *   applied (in delta a lost subscription change would never be repeated).
 */
import type { DemandSet } from '../domain/demand.js';
import { resourceVersion, versionOf, type Resource } from '../resources/resource.js';
import type { ResourceType } from '../resources/resource-type.js';
import { encodeDeltaDiscoveryResponse, type DeltaResource } from '../wire/envelope.js';
import type { DeltaDiscoveryRequest } from '../wire/request.js';
import { GlobResponse, HeldGlobs, isGlob } from './delta-collections.js';
import { settleNack } from './delta-nack.js';
import { forget, newState, recordSent, resourceStatuses, type DeltaTypeState } from './delta-type-state.js';
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
import { StreamSession, type TypeVersions } from './stream-session.js';
import { wireNonce } from './wire-nonce.js';

export class DeltaSession extends StreamSession<DeltaTypeState> implements Session<DeltaDiscoveryRequest> {
  receive(req: DeltaDiscoveryRequest): Received {
    const ignored = this.admit(req);
    if (ignored) return ignored;
    const typeUrl = req.typeUrl;
    let state = this.subscriptions.get(typeUrl);
    const initial = Object.keys(req.initialVersions);
    const refused =
      overLimits(req.subscribe, (state?.names.size ?? 0) + req.subscribe.length, this.limits) ??
      overLimits(initial, initial.length, this.limits);
    if (refused) return { outcome: { kind: 'rejected', typeUrl, detail: `resource_names_subscribe: ${refused}` } };
    let outcome: RequestOutcome;
    if (!state) {
      state = newState();
      const type = this.types.get(typeUrl);
      if (type?.collections) state.globs = new HeldGlobs();
      for (const [name, version] of Object.entries(req.initialVersions)) state.held.set(name, version);
      this.subscriptions.set(typeUrl, state);
      outcome = { kind: 'initial', typeUrl };
    } else if (req.responseNonce === '') {
      outcome = { kind: 'subscribe', typeUrl };
    } else {
      outcome = this.acknowledge(state, typeUrl, req);
    }
    const first = outcome.kind === 'initial';
    const changed = this.subscribe(state, typeUrl, req.subscribe, req.unsubscribe, first);
    // Versions held of resources not subscribed to are of no use.
    if (first) state.globs?.adopt(state.held, state.names);
    if (first && !state.wildcard) for (const n of [...state.held.keys()]) if (!state.names.has(n)) forget(state, n);
    // What a reconnecting client holds is what it runs: acknowledged, as far as CSDS can tell.
    if (first) for (const [n, v] of state.held) state.acked.set(n, v);
    // Warming: what an updated Cluster or Listener on this stream waits for is sent whatever the client holds.
    if (first) for (const n of this.takeOwed(typeUrl) ?? []) state.held.delete(n);
    // A NACK rolled back what its response carried: what the client lacks now is sent (in halves, see delta-nack.ts).
    if (!first && !changed && outcome.kind !== 'nack') return { outcome };
    return { outcome, answer: first };
  }

  respond(typeUrl: string, mustAnswer: boolean, shared?: SharedResponses): OutgoingResponse | undefined {
    const state = this.subscriptions.get(typeUrl);
    return state ? this.respondType(typeUrl, state, mustAnswer, shared) : undefined;
  }

  concerns(touched: TouchedNames): boolean {
    for (const [typeUrl, state] of this.subscriptions) {
      const names = touched.get(typeUrl);
      if (!names || names.size === 0) continue;
      if (state.wildcard) return true;
      for (const n of names) if (state.names.has(n) || state.held.has(n)) return true;
    }
    return false;
  }

  protected readonly protocol = 'delta' as const;

  protected versions(s: DeltaTypeState, typeUrl: string): TypeVersions {
    const resources = resourceStatuses(s).map((r) => {
      const stamp = s.sentIn.get(r.name) ?? (s.held.has(r.name) ? s.firstSent : undefined);
      return {
        ...r,
        ...(r.version !== '' && !s.globs?.names.has(r.name) ? { body: this.bodyOf(typeUrl, r.name, r.version) } : {}),
        ...(stamp ? { sentAt: new Date(stamp.at).toISOString() } : {}),
      };
    });
    return { sent: s.systemVersionSent, acked: s.systemVersionAcked, resources };
  }

  /** An ACK or NACK of a response this stream sent, or a stale nonce (recorded as neither). */
  private acknowledge(state: DeltaTypeState, typeUrl: string, req: DeltaDiscoveryRequest): RequestOutcome {
    const sent = state.outstanding.get(req.responseNonce);
    if (!sent) return { kind: 'stale', typeUrl, nonce: req.responseNonce };
    // This response and every older one are settled.
    for (const nonce of state.outstanding.keys()) {
      state.outstanding.delete(nonce);
      if (nonce === req.responseNonce) break;
    }
    if (req.errorDetail) {
      const detail = req.errorDetail.message;
      state.lastNack = { version: sent.systemVersion, nonce: req.responseNonce, detail, at: new Date().toISOString() };
      const names = settleNack(state, sent);
      return { kind: 'nack', typeUrl, detail, names };
    }
    state.systemVersionAcked = sent.systemVersion;
    for (const [name, version] of sent.versions) {
      state.nacked.delete(name);
      if (version === null) state.acked.delete(name);
      else state.acked.set(name, version);
    }
    for (const { glob, now } of sent.globs ?? []) {
      state.globs?.nacked.delete(glob);
      state.globs?.acked.set(glob, now);
    }
    return { kind: 'ack', typeUrl };
  }

  /** Applies subscription changes; returns whether anything changed. */
  private subscribe(
    state: DeltaTypeState,
    typeUrl: string,
    subscribe: readonly string[],
    unsubscribe: readonly string[],
    first: boolean,
  ): boolean {
    const wildcardBefore = state.wildcard;
    let changed = false;
    const named = subscribe.filter((n) => n !== '*');
    if (first && subscribe.length === 0 && this.types.get(typeUrl)?.fullStateInSotw === true) {
      state.wildcard = true;
    }
    // A legacy wildcard is kept when names are subscribed after it (on-demand CDS on Envoy's wildcard CDS
    // stream): only an unsubscribe of `*` ends a wildcard (xds_protocol.rst, "How the client specifies what
    // resources to return"; Envoy's DeltaSubscriptionState keeps `*` requested and never sends it again).
    if (subscribe.includes('*')) state.wildcard = true;
    if (unsubscribe.includes('*')) state.wildcard = false;
    // Lazy xDS: on-demand names are in use while subscribed; an unsubscribed one starts its unused timeout.
    const demand = this.types.get(typeUrl)?.demandScoped ? this.placement.demand : undefined;
    const collections = this.types.get(typeUrl)?.collections;
    let grew = false;
    for (const n of named) {
      if (!first) {
        // Subscribing a name again (held, or unsubscribed then subscribed) means the client has lost its
        // copy: "our user may have forgotten its copy of the resource" (Envoy's
        // DeltaSubscriptionState::updateSubscriptionInterest), so it is sent again.
        if (state.held.delete(n)) changed = true;
        if (state.absent.delete(n)) changed = true;
        if (state.globs?.resend(n)) changed = true;
      }
      if (state.names.has(n)) continue;
      state.names.add(n);
      if (collections && isGlob(collections, n)) state.globs?.subscribe(n);
      if (demand) {
        grew ||= !demand.has(n, Date.now());
        demand.use([n]);
      }
      changed = true;
    }
    if (grew) this.demandGrew(typeUrl);
    for (const n of unsubscribe) {
      if (n === '*' || !state.names.delete(n)) continue;
      state.globs?.forget(n);
      demand?.release([n], Date.now());
      changed = true;
      state.absent.delete(n);
      // The client forgets what it unsubscribed from, unless the wildcard still brings it.
      if (!state.wildcard) forget(state, n);
    }
    if (wildcardBefore && !state.wildcard) {
      for (const n of [...state.held.keys()]) if (!state.names.has(n)) forget(state, n);
    }
    return changed || state.wildcard !== wildcardBefore;
  }

  private respondType(
    typeUrl: string,
    state: DeltaTypeState,
    mustAnswer: boolean,
    shared?: SharedResponses,
  ): OutgoingResponse | undefined {
    const type = this.types.get(typeUrl);
    const now = Date.now();
    const globs = type?.collections && state.globs ? new GlobResponse(type.collections, state.globs) : undefined;
    // After a NACK of a response with several resources, one group of them per response (delta-nack.ts).
    const group = state.retry?.shift();
    if (state.retry?.length === 0) delete state.retry;
    const only = group ? new Set(group) : undefined;
    globs?.collect(only);
    const { current, resources, removed, versions } = this.diffType(type, state, globs, now, only);
    // Shared bytes are keyed by what makes them: each plain resource, and each collection step by name.
    let key: string | undefined =
      `delta\n${typeUrl}\n${resources.map((r) => `${r.name}=${r.version}`).join('\n')}\n-\n${removed.join('\n')}`;
    // Collections: their members are gathered only to encode (shared bytes need none of them).
    const steps = globs && globs.steps.length > 0 ? globs : undefined;
    if (steps) {
      const part = steps.key();
      key = part === undefined ? undefined : `${key}\n+\n${part}`;
    }
    const count = resources.length + (steps?.count ?? 0);
    if (count === 0 && removed.length === 0 && !steps && !mustAnswer) {
      return only ? this.respondType(typeUrl, state, mustAnswer, shared) : undefined;
    }
    // The next group, then what changed meanwhile, go in the responses after this one.
    if (only) this.makeDue(typeUrl);
    if (type?.warming)
      this.warmAfter(
        typeUrl,
        resources.map((r) => r.name),
      );
    // Collections: the epoch of the collections as this stream now holds them (informational in delta).
    const systemVersion = globs ? `${versionOf(current)}.${globs.epoch.toString(36)}` : versionOf(current);
    // The wire nonce from the content (wire-nonce.ts), unlike every nonce of this type an answer may still name.
    const content = `${key ?? `${typeUrl}\n${this.nonces + 1}`}\n${systemVersion}`;
    const sequence = ++this.nonces;
    const nonce = wireNonce(content, sequence, (n) => n === state.nonceSent || state.outstanding.has(n));
    recordSent(state, { nonce, at: now, nonces: sequence, systemVersion, versions, resources, removed, globs });
    let carried: DeltaResource[] | undefined;
    const all = (): DeltaResource[] => (carried ??= steps ? resources.concat(steps.resources()) : resources);
    const encode = (): Buffer =>
      encodeDeltaDiscoveryResponse({
        systemVersionInfo: systemVersion,
        typeUrl,
        nonce,
        resources: all(),
        removed: steps ? removed.concat(steps.removed()) : removed,
      });
    let bytes: Buffer;
    if (shared && key !== undefined) {
      key = `${content}\n${nonce}`;
      const held = shared.get(key);
      bytes = held ?? encode();
      // What its content covers: the names subscribed (a wildcard's or collections', all of the type's).
      if (!held) shared.set(key, bytes, scopeOf(typeUrl, state.wildcard || steps ? undefined : state.names));
    } else bytes = encode();
    let names: string[] | undefined;
    return {
      typeUrl,
      version: systemVersion,
      nonce,
      bytes,
      count,
      // Listed only when asked for (an oversized response's report): most responses are never looked into.
      get names(): readonly string[] {
        return (names ??= all().map((r) => r.name));
      },
    };
  }

  /**
   * The plain (non-collection) names against what the client holds: what exists now, what it lacks at that
   * version, and what to send as removed (deleted, out of its demand set, or subscribed and not existing).
   */
  private diffType(
    type: ResourceType | undefined,
    state: DeltaTypeState,
    globs: GlobResponse | undefined,
    now: number,
    only: ReadonlySet<string> | undefined,
  ): TypeDiff {
    const d: TypeDiff = { current: new Map(), resources: [], removed: [], versions: new Map() };
    const lazy = this.demandNarrowing(type);
    // Globs were brought up to date before; with nothing but globs subscribed there is nothing else to look at.
    const plain = !globs || state.wildcard || state.globs!.names.size < state.names.size;
    for (const name of plain ? this.wanted(type, state) : []) {
      if (globs?.is(name) || (only && !only.has(name))) continue;
      // A held name that left the node's demand set is removed like a deleted one.
      const dropped = lazy !== undefined && !state.names.has(name) && !lazy.has(name, now);
      const r = dropped ? undefined : type?.resolve(name, this.placement);
      if (r) {
        d.current.set(name, r);
        state.absent.delete(name);
        const version = resourceVersion(r);
        // What the client refused, sent on its own, is not sent again until it changes.
        if (state.held.get(name) === version || state.refused?.get(name) === version) continue;
        state.refused?.delete(name);
        state.held.set(name, version);
        d.resources.push({ name, version, any: r.any });
        d.versions.set(name, version);
      } else if (state.held.delete(name) || (state.names.has(name) && !state.absent.has(name))) {
        if (state.names.has(name)) state.absent.add(name);
        d.removed.push(name);
        d.versions.set(name, null);
      }
    }
    return d;
  }

  protected resend(typeUrl: string, names: readonly string[], prefixes: readonly string[]): boolean {
    const state = this.subscriptions.get(typeUrl);
    if (!state) return false;
    let any = false;
    for (const n of names) if ((state.wildcard || state.names.has(n)) && state.held.delete(n)) any = true;
    if (state.globs && prefixes.length > 0) {
      for (const g of state.globs.names) if (prefixes.some((p) => g.startsWith(p)) && state.globs.resend(g)) any = true;
    }
    return any;
  }

  /** The demand set that narrows this type's wildcard for this client, if any (lazy xDS). */
  private demandNarrowing(type: ResourceType | undefined): DemandSet | undefined {
    if (!type?.demandScoped || (type.wholeOnDemand === true && this.placement.onDemand === true)) return undefined;
    return this.placement.demand;
  }

  /** Explicit names; with a wildcard, every existing name and every name the client holds too. */
  private wanted(type: ResourceType | undefined, state: DeltaTypeState): Iterable<string> {
    if (!state.wildcard) return state.names;
    const demand = this.demandNarrowing(type);
    const all = type?.names() ?? [];
    // Lazy: what the node holds stays wanted, so a name leaving the demand set is sent as removed.
    return new Set([...state.names, ...(demand ? demand.filter(all, Date.now()) : all), ...state.held.keys()]);
  }
}

/** One type's plain names against what the client holds (DeltaSession.diffType). */
interface TypeDiff {
  readonly current: Map<string, Resource>;
  readonly resources: DeltaResource[];
  readonly removed: string[];
  /** name → version sent, or null for a name sent as removed. */
  readonly versions: Map<string, string | null>;
}
