/**
 * What a SotW and a delta session share: the client's node and placement
 * (taken from its first request that names a node), the per-type
 * subscriptions, the count of requests for types not served here, the push
 * order, and releasing lazy-xDS demand when the stream ends.
 */
import type { Client } from '../domain/client.js';
import type { ResourceTypes } from '../resources/resource-type.js';
import { versionText } from '../resources/resource.js';
import { flatten } from '../wire/rope.js';
import type { NodeInfo } from '../wire/request.js';
import type { ClientStatus, NackRecord, ResourceStatus, TypeStatus } from './client-status.js';
import { placementOf, wantsLeds } from './placement.js';
import { DEFAULT_LIMITS, inPushOrder, unservedType, type Received, type SessionLimits } from './session.js';

/** The part of a type's state both protocols keep. */
export interface SubscriptionState {
  wildcard: boolean;
  names: Set<string>;
  nonceSent: string;
  lastNack?: NackRecord;
}

/** What a protocol reports of one type beyond the shared fields. */
export interface TypeVersions {
  readonly sent: string;
  readonly acked: string;
  readonly resources: ResourceStatus[];
}

const NONE: readonly string[] = [];

/** A stream subscribed to more names than this is grouped by its placement (the key stays short and cheap). */
const MAX_GROUPED_NAMES = 16;

export abstract class StreamSession<State extends SubscriptionState> {
  node: NodeInfo | undefined;
  placement: Client = placementOf(undefined);
  readonly connectedAt = new Date().toISOString();
  protected readonly subscriptions = new Map<string, State>();
  protected nonces = 0;
  /** Requests for types this server does not serve: counted, never stored. */
  private ignored = 0;
  /** Types to bring up to date next (takeDue), in the order they became due. */
  private readonly due = new Set<string>();

  constructor(
    readonly id: number,
    readonly peer: string,
    protected readonly types: ResourceTypes,
    protected readonly limits: SessionLimits = DEFAULT_LIMITS,
  ) {}

  get nodeId(): string {
    return this.node?.id ?? '';
  }

  /**
   * The start of every request: the first node named sets the placement (and
   * its demand, for lazy xDS). Returns the outcome of a request for a type
   * not served here, or undefined when the protocol goes on with it.
   */
  protected admit(req: { readonly node?: NodeInfo | undefined; readonly typeUrl: string }): Received | undefined {
    if (!this.node && req.node) {
      this.node = req.node;
      const demand = this.types.demandFor?.(req.node);
      const leds = this.protocol === 'delta' && this.types.servesLeds?.() === true && wantsLeds(req.node);
      const placement = placementOf(req.node);
      // On-demand CDS is delta only: Envoy treats a SotW update for it as a programming error.
      const onDemand = demand !== undefined && this.protocol === 'delta' && placement.kind === 'envoy';
      this.placement = {
        ...placement,
        ...(demand ? { demand } : {}),
        ...(leds ? { leds } : {}),
        ...(onDemand ? { onDemand } : {}),
      };
    }
    const typeUrl = req.typeUrl;
    const unserved = unservedType(typeUrl, this.types.get(typeUrl) !== undefined);
    if (!unserved) return undefined;
    this.ignored++;
    return { outcome: { kind: 'ignored', typeUrl, detail: unserved } };
  }

  /** Brings `typeUrl` up to date next (a retry after a NACK goes on in further responses). */
  protected makeDue(typeUrl: string): void {
    this.due.add(typeUrl);
  }

  takeDue(): readonly string[] {
    if (this.due.size === 0) return NONE;
    const out = [...this.due];
    this.due.clear();
    return out;
  }

  /**
   * Envoy's warming (xds_protocol.rst, "Resource warming"; Envoy's
   * ClusterManagerImpl keeps an updated cluster warming until its EDS watch
   * has an update): resources of `typeUrl` were just sent added or updated,
   * so what each waits for is sent again next, even unchanged, when this
   * stream holds it. On SotW Envoy re-requests it with the same names,
   * version and nonce; on delta it sends nothing (its watch map already has
   * the name), so only the server can end the wait.
   */
  protected warmAfter(typeUrl: string, names: readonly string[]): void {
    const warming = this.types.get(typeUrl)?.warming;
    if (!warming || names.length === 0) return;
    const byType = new Map<string, { names: string[]; prefixes: string[] }>();
    for (const name of names) {
      for (const t of warming.warms(name, this.placement)) {
        if (!this.subscriptions.has(t.typeUrl)) {
          this.owe(t.typeUrl, t.names);
          continue;
        }
        let e = byType.get(t.typeUrl);
        if (!e) byType.set(t.typeUrl, (e = { names: [], prefixes: [] }));
        if (t.names) e.names.push(...t.names);
        if (t.prefix !== undefined) e.prefixes.push(t.prefix);
      }
    }
    for (const [target, { names: n, prefixes }] of byType) {
      if (this.resend(target, n, prefixes)) this.due.add(target);
    }
  }

  /**
   * Names to send again once the client subscribes to their type: a client
   * reconnecting (to this replica or another) says it holds them
   * (initial_resource_versions, or SotW version_info), but the Cluster or
   * Listener waiting for them was just updated on this stream. Bounded by the
   * per-type name limit; handed out once, to the type's first request.
   */
  private owed?: Map<string, Set<string>>;

  private owe(typeUrl: string, names: readonly string[] | undefined): void {
    if (!names || names.length === 0) return;
    this.owed ??= new Map();
    let s = this.owed.get(typeUrl);
    if (!s) this.owed.set(typeUrl, (s = new Set()));
    for (const n of names) if (s.size < this.limits.maxNamesPerType) s.add(n);
  }

  /** What warming owes a type on its first request (see `owe`). */
  protected takeOwed(typeUrl: string): ReadonlySet<string> | undefined {
    const s = this.owed?.get(typeUrl);
    this.owed?.delete(typeUrl);
    return s;
  }

  /**
   * Lazy xDS: a name subscribed on `typeUrl` joined the node's demand set, so
   * the stream's other demand-scoped wildcards (an on-demand cluster's
   * listener, docs/envoy.md "Lazy xDS") take it at once, not at the next push.
   */
  protected demandGrew(typeUrl: string): void {
    for (const [t, s] of this.subscriptions) {
      if (t !== typeUrl && s.wildcard && this.types.get(t)?.demandScoped) this.due.add(t);
    }
  }

  /**
   * Forgets that the client holds these names (and, with collections, the
   * globs under these prefixes) so that the next response of the type carries
   * them; returns whether it held any.
   */
  protected abstract resend(typeUrl: string, names: readonly string[], prefixes: readonly string[]): boolean;

  private share: string | undefined;

  /**
   * Streams likely to be sent the same bytes next. Where every subscribed type can say which clients get
   * the same resource (EDS: the CLA cache's key, one per tree node), by that: client localities under one
   * tree node then go out together. Otherwise by the placement (the protocol, locality and node).
   */
  shareKey(): string {
    let key = this.protocol;
    for (const [typeUrl, state] of this.subscriptions) {
      const type = this.types.get(typeUrl);
      if (!type?.shares || state.wildcard || state.names.size > MAX_GROUPED_NAMES) return this.placementKey();
      key += `\n${typeUrl}`;
      for (const name of state.names) {
        const group = type.shares.shareGroup(name, this.placement);
        if (group === undefined) return this.placementKey();
        key += `\n${name}\n${group}`;
      }
    }
    return key;
  }

  private placementKey(): string {
    if (this.share !== undefined) return this.share;
    const { demand: _demand, ...where } = this.placement;
    const key = `${this.protocol} ${JSON.stringify(where)}`;
    // Kept once the node is known: the placement does not change after that.
    if (this.node) this.share = key;
    return key;
  }

  pushOrder(): string[] {
    return inPushOrder(this.subscriptions.keys(), (t) => this.types.get(t)?.pushRank);
  }

  closed(): void {
    const now = Date.now();
    for (const [typeUrl, state] of this.subscriptions) {
      if (this.types.get(typeUrl)?.demandScoped) this.placement.demand?.release(state.names, now);
    }
  }

  protected abstract readonly protocol: 'sotw' | 'delta';

  /** The versions sent and acknowledged for a type, and each resource's state, as this protocol keeps them. */
  protected abstract versions(state: State, typeUrl: string): TypeVersions;

  /**
   * CSDS: the encoded Any of a resource, if the server's current copy for this
   * client is still the one sent (`version`, as versionText of its hash).
   */
  protected bodyOf(typeUrl: string, name: string, version: string): () => Uint8Array | undefined {
    return () => {
      const r = this.types.get(typeUrl)?.resolve(name, this.placement);
      return r && versionText(r.hash) === version ? flatten(r.any) : undefined;
    };
  }

  /** `maxNames`: at most this many names and resources listed per type. */
  status(maxNames = Infinity): ClientStatus {
    const types: TypeStatus[] = [];
    for (const [typeUrl, s] of this.subscriptions) {
      const v = this.versions(s, typeUrl);
      types.push({
        typeUrl,
        subscribed: s.wildcard ? '*' : [...s.names].sort().slice(0, maxNames),
        versionSent: v.sent,
        nonceSent: s.nonceSent,
        versionAcked: v.acked,
        ...(s.lastNack ? { lastNack: s.lastNack } : {}),
        resources: v.resources.slice(0, maxNames),
      });
    }
    return {
      streamId: this.id,
      protocol: this.protocol,
      ignoredRequests: this.ignored,
      nodeId: this.nodeId,
      cluster: this.node?.cluster ?? '',
      ...(this.node?.userAgentName ? { userAgent: this.node.userAgentName } : {}),
      peer: this.peer,
      connectedAt: this.connectedAt,
      placement: this.placement,
      types,
    };
  }
}
