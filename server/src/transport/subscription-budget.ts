/**
 * What ADS clients may make the server hold, counted at the transport edge
 * before a request reaches its session: streams per connection, subscribed
 * names and bytes of subscription state per connection, and one budget of
 * subscription bytes for the whole server. A request past a limit ends its
 * stream (RESOURCE_EXHAUSTED, the detail names the limit and its flag);
 * everyone else goes on being served.
 *
 * A connection is what `call.getPeer()` names (the client's address and
 * port: one TCP connection). The state counted is what clients asked for:
 * per SotW stream and type the names of its last request (each request
 * replaces them); per delta stream and type the set of names subscribed and
 * not unsubscribed, plus the initial versions it declared. Types the server
 * does not serve keep no state in the session, so none is counted here.
 */

/** Bytes counted per subscribed name besides its characters: the set entry and string header holding it. */
export const NAME_OVERHEAD_BYTES = 64;

export interface XdsLimits {
  /** ADS streams open at once on one connection. */
  readonly maxStreamsPerConnection: number;
  /** Names subscribed on one connection, all its streams and types together. */
  readonly maxNamesPerConnection: number;
  /** Bytes of subscription state one connection may make the server hold. */
  readonly maxBytesPerConnection: number;
  /** Bytes of subscription state all clients together may make the server hold. */
  readonly subscriptionBudgetBytes: number;
}

/** Which limit a refusal hit (the `reason` label of `canopy_xds_refused_requests_total`). */
export type LimitName =
  'streams_per_connection' | 'names_per_connection' | 'bytes_per_connection' | 'subscription_budget';

export const LIMIT_NAMES: readonly LimitName[] = [
  'streams_per_connection',
  'names_per_connection',
  'bytes_per_connection',
  'subscription_budget',
];

/** The flag that sets each limit, named in refusals so an operator knows what to raise. */
export const LIMIT_FLAGS: Readonly<Record<LimitName, string>> = {
  streams_per_connection: '--xds-max-streams-per-connection',
  names_per_connection: '--xds-max-names-per-connection',
  bytes_per_connection: '--xds-max-bytes-per-connection',
  subscription_budget: '--xds-subscription-budget',
};

/**
 * The most one connection may hold by default, whatever the heap: 32 MiB counted, which the server
 * holds as about that much again at most (e2e/xds-connection-share.test.ts measures under 64 MB). The
 * share grew with the heap before, so one unauthenticated connection to a large-heap server could make
 * it hold 140 MB; no single client (Envoy, a proxy's shared channel) needs more than a few MiB.
 */
export const MAX_DEFAULT_BYTES_PER_CONNECTION = 32 * 1024 * 1024;

/**
 * Defaults from the V8 heap limit (`--max-old-space-size`, else what Node chose for the machine): a
 * quarter of the heap for all subscription state, a sixteenth of that per connection, at least 1 MiB
 * and at most MAX_DEFAULT_BYTES_PER_CONNECTION. Streams per connection: 1,000, as one HTTP/2
 * connection may carry many clients (a proxy, a test harness with one channel).
 */
export function defaultXdsLimits(heapLimitBytes: number): XdsLimits {
  const budget = Math.floor(heapLimitBytes / 4);
  return {
    maxStreamsPerConnection: 1000,
    maxNamesPerConnection: 100_000,
    maxBytesPerConnection: defaultBytesPerConnection(budget),
    subscriptionBudgetBytes: budget,
  };
}

/** One connection's default share of a subscription budget. */
export function defaultBytesPerConnection(budgetBytes: number): number {
  return Math.min(MAX_DEFAULT_BYTES_PER_CONNECTION, Math.max(1024 * 1024, Math.floor(budgetBytes / 16)));
}

export interface Refusal {
  readonly limit: LimitName;
  readonly detail: string;
}

interface ConnectionUse {
  streams: number;
  names: number;
  bytes: number;
}

/** The requests the edge reads: SotW replaces a type's names, delta adds and removes. */
export type CountedRequest =
  | { readonly kind: 'sotw'; readonly typeUrl: string; readonly names: readonly string[] }
  | {
      readonly kind: 'delta';
      readonly typeUrl: string;
      readonly subscribe: readonly string[];
      readonly unsubscribe: readonly string[];
      readonly initialVersions: Readonly<Record<string, string>>;
    };

export class SubscriptionBudget {
  private readonly connections = new Map<string, ConnectionUse>();
  private total = 0;

  constructor(
    readonly limits: XdsLimits,
    private readonly served: (typeUrl: string) => boolean,
  ) {}

  /** Bytes of subscription state counted now, all connections together. */
  get used(): number {
    return this.total;
  }

  /** A new stream on `connection`, or why it is refused. */
  openStream(connection: string): StreamAccount | Refusal {
    const use = this.connections.get(connection) ?? { streams: 0, names: 0, bytes: 0 };
    if (use.streams >= this.limits.maxStreamsPerConnection) {
      return refusal(
        'streams_per_connection',
        `this connection has ${use.streams} ADS streams open; the limit is ${this.limits.maxStreamsPerConnection} per connection`,
      );
    }
    use.streams++;
    this.connections.set(connection, use);
    return new StreamAccount(this, connection, use);
  }

  /** @internal Applies a change of `names` and `bytes` to a connection, or says which limit it would pass. */
  charge(use: ConnectionUse, names: number, bytes: number): Refusal | undefined {
    if (names > 0 && use.names + names > this.limits.maxNamesPerConnection) {
      return refusal(
        'names_per_connection',
        `this connection would subscribe to ${use.names + names} names; the limit is ${this.limits.maxNamesPerConnection} per connection`,
      );
    }
    if (bytes > 0 && use.bytes + bytes > this.limits.maxBytesPerConnection) {
      return refusal(
        'bytes_per_connection',
        `this connection's subscriptions would hold ${mib(use.bytes + bytes)}; the limit is ` +
          `${mib(this.limits.maxBytesPerConnection)} per connection`,
      );
    }
    if (bytes > 0 && this.total + bytes > this.limits.subscriptionBudgetBytes) {
      return refusal(
        'subscription_budget',
        `the server's subscription budget (${mib(this.limits.subscriptionBudgetBytes)} for all clients) is spent: ` +
          `${mib(this.total)} held, this request adds ${mib(bytes)}`,
      );
    }
    use.names += names;
    use.bytes += bytes;
    this.total += bytes;
    return undefined;
  }

  /** @internal A stream ended: what it held is given back. */
  release(connection: string, use: ConnectionUse, names: number, bytes: number): void {
    use.names -= names;
    use.bytes -= bytes;
    this.total -= bytes;
    if (--use.streams === 0) this.connections.delete(connection);
  }

  isServed(typeUrl: string): boolean {
    return this.served(typeUrl);
  }
}

/** One stream's share: what each of its types holds, charged to its connection and the server. */
export class StreamAccount {
  /** SotW: the names and bytes of the type's last request. */
  private readonly sotw = new Map<string, { names: number; bytes: number }>();
  /** Delta: the names subscribed (with initial versions' bytes) per type. */
  private readonly delta = new Map<string, Map<string, number>>();
  private names = 0;
  private bytes = 0;
  private closed = false;

  constructor(
    private readonly budget: SubscriptionBudget,
    private readonly connection: string,
    private readonly use: ConnectionUse,
  ) {}

  /** Counts what `req` makes the stream hold; a refusal leaves the counts as they were. */
  admit(req: CountedRequest): Refusal | undefined {
    if (this.closed || !this.budget.isServed(req.typeUrl)) return undefined;
    return req.kind === 'sotw' ? this.admitSotw(req.typeUrl, req.names) : this.admitDelta(req);
  }

  /** The stream ended. Safe to call more than once. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.budget.release(this.connection, this.use, this.names, this.bytes);
  }

  private admitSotw(typeUrl: string, names: readonly string[]): Refusal | undefined {
    const before = this.sotw.get(typeUrl) ?? { names: 0, bytes: 0 };
    let bytes = 0;
    for (const n of names) bytes += nameBytes(n);
    const refused = this.charge(names.length - before.names, bytes - before.bytes);
    if (refused) return refused;
    this.sotw.set(typeUrl, { names: names.length, bytes });
    return undefined;
  }

  private admitDelta(req: Extract<CountedRequest, { kind: 'delta' }>): Refusal | undefined {
    const held = this.delta.get(req.typeUrl) ?? new Map<string, number>();
    const next = new Map<string, number>();
    for (const [name, version] of Object.entries(req.initialVersions)) next.set(name, nameBytes(name) + version.length);
    for (const n of req.subscribe) if (!held.has(n) && !next.has(n)) next.set(n, nameBytes(n));
    let names = 0;
    let bytes = 0;
    for (const [n, b] of next) {
      const was = held.get(n);
      if (was === undefined) names++;
      bytes += b - (was ?? 0);
    }
    const gone = req.unsubscribe.filter((n) => held.has(n) && !next.has(n));
    for (const n of gone) {
      names--;
      bytes -= held.get(n)!;
    }
    const refused = this.charge(names, bytes);
    if (refused) return refused;
    for (const n of gone) held.delete(n);
    for (const [n, b] of next) held.set(n, b);
    this.delta.set(req.typeUrl, held);
    return undefined;
  }

  private charge(names: number, bytes: number): Refusal | undefined {
    const refused = this.budget.charge(this.use, names, bytes);
    if (refused) return refused;
    this.names += names;
    this.bytes += bytes;
    return undefined;
  }
}

function nameBytes(name: string): number {
  return name.length + NAME_OVERHEAD_BYTES;
}

function refusal(limit: LimitName, what: string): Refusal {
  return { limit, detail: `${what} (${LIMIT_FLAGS[limit]}); this stream is refused, others are served` };
}

function mib(bytes: number): string {
  return `${(bytes / (1024 * 1024)).toFixed(1)} MiB`;
}
