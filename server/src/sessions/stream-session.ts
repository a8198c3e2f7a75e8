/**
 * What a SotW and a delta session share: the client's node and placement
 * (taken from its first request that names a node), the per-type
 * subscriptions, the count of requests for types not served here, the push
 * order, and releasing lazy-xDS demand when the stream ends.
 */
import type { Client } from '../domain/client.js';
import type { ResourceTypes } from '../resources/resource-type.js';
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

export abstract class StreamSession<State extends SubscriptionState> {
  node: NodeInfo | undefined;
  placement: Client = placementOf(undefined);
  readonly connectedAt = new Date().toISOString();
  protected readonly subscriptions = new Map<string, State>();
  protected nonces = 0;
  /** Requests for types this server does not serve: counted, never stored. */
  private ignored = 0;

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
      this.placement = { ...placementOf(req.node), ...(demand ? { demand } : {}), ...(leds ? { leds } : {}) };
    }
    const typeUrl = req.typeUrl;
    const unserved = unservedType(typeUrl, this.types.get(typeUrl) !== undefined);
    if (!unserved) return undefined;
    this.ignored++;
    return { outcome: { kind: 'ignored', typeUrl, detail: unserved } };
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
  protected abstract versions(state: State): TypeVersions;

  /** `maxNames`: at most this many names and resources listed per type. */
  status(maxNames = Infinity): ClientStatus {
    const types: TypeStatus[] = [];
    for (const [typeUrl, s] of this.subscriptions) {
      const v = this.versions(s);
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
      peer: this.peer,
      connectedAt: this.connectedAt,
      placement: this.placement,
      types,
    };
  }
}
