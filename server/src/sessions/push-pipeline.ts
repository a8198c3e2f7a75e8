/**
 * The ADS push pipeline, without gRPC: streams come and go through `open`,
 * changes arrive through `notify`, are debounced and merged, and each affected
 * stream gets at most one pending push, written when its transport can take it.
 */
import type { ResourceRegistry } from '../resources/registry.js';
import { shortTypeName } from '../resources/type-urls.js';
import type { DeltaDiscoveryRequest, DiscoveryRequest, NodeInfo } from '../wire/request.js';
import type { ClientStatus } from './client-status.js';
import { DeltaSession } from './delta-session.js';
import { nullObserver, type XdsObserver } from './observer.js';
import type { OutgoingResponse, Session } from './session.js';
import { WeakResponses } from './shared-responses.js';
import { SotwSession } from './sotw-session.js';

/** What the transport gives the pipeline for one stream. */
export interface StreamSink {
  /**
   * Returns false when the transport's buffer is full; `drained` is then called once it empties.
   * `flushed`, when given, is called once the bytes have gone out to the client.
   */
  write(bytes: Buffer, flushed?: () => void): boolean;
  end(): void;
}

export interface StreamHandle<Request = DiscoveryRequest> {
  receive(req: Request): void;
  drained(): void;
  closed(): void;
}

/** The subset of pino the pipeline logs through. */
export interface XdsLog {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  debug(obj: object, msg: string): void;
}

const silent: XdsLog = { info() {}, warn() {}, debug() {} };

export interface PushPipelineOptions {
  readonly resources: ResourceRegistry;
  readonly observer?: XdsObserver;
  readonly log?: XdsLog;
  /** Quiet period that merges a burst of changes into one push (default 100 ms). */
  readonly debounceMs?: number;
  /** A push is never held back longer than this by a steady stream of changes (default 10 × debounce). */
  readonly maxDelayMs?: number;
  /**
   * At most this many streams have a push in flight (handed to the transport,
   * not yet flushed to the client) at once; the others wait in order and start
   * as slots free, so memory stays flat and the first streams finish early.
   * 0 turns the window off. Default 256.
   */
  readonly pushWindow?: number;
  /** A slot whose stream has not answered by then is freed anyway (default 10 s). */
  readonly pushWindowTimeoutMs?: number;
}

/** What the pipeline reads of a request of either protocol. */
interface AnyRequest {
  readonly node?: NodeInfo;
}

interface Conn {
  readonly state: Session<never>;
  readonly sink: StreamSink;
  blocked: boolean;
  /** The one pending push: set when a change concerns this stream. */
  pending: boolean;
  /** When the oldest change not yet sent to this stream happened. */
  changeAt: number | undefined;
  /** Holds a slot of the push window until its push is flushed (or the stream closes, or the slot times out). */
  slot: NodeJS.Timeout | undefined;
  /** Waiting in the window's queue. */
  queued: boolean;
}

export class PushPipeline {
  private readonly conns = new Map<number, Conn>();
  private nextId = 1;
  private readonly resources: ResourceRegistry;
  private readonly observer: XdsObserver;
  private readonly log: XdsLog;
  private readonly debounceMs: number;
  private readonly maxDelayMs: number;
  private changed = new Set<string>();
  private firstChangeAt: number | undefined;
  private timer: NodeJS.Timeout | undefined;
  private closing = false;
  /** Streams in the same state get byte-identical responses: each is encoded once while any stream holds it. */
  private readonly shared = new WeakResponses();
  private readonly window: number;
  private readonly windowTimeoutMs: number;
  private inFlight = 0;
  private readonly waiting: Conn[] = [];

  constructor(opts: PushPipelineOptions) {
    this.resources = opts.resources;
    this.observer = opts.observer ?? nullObserver;
    this.log = opts.log ?? silent;
    this.debounceMs = opts.debounceMs ?? 100;
    this.maxDelayMs = opts.maxDelayMs ?? this.debounceMs * 10;
    this.window = opts.pushWindow ?? 256;
    this.windowTimeoutMs = opts.pushWindowTimeoutMs ?? 10_000;
  }

  /** Pushes written and not yet answered (at most `pushWindow`). */
  get pushesInFlight(): number {
    return this.inFlight;
  }

  get connected(): number {
    return this.conns.size;
  }

  /** A state-of-the-world stream (StreamAggregatedResources). */
  open(peer: string, sink: StreamSink): StreamHandle<DiscoveryRequest> {
    return this.openSession(new SotwSession(this.nextId++, peer, this.resources), peer, sink);
  }

  /** An incremental stream (DeltaAggregatedResources). */
  openDelta(peer: string, sink: StreamSink): StreamHandle<DeltaDiscoveryRequest> {
    return this.openSession(new DeltaSession(this.nextId++, peer, this.resources), peer, sink);
  }

  private openSession<R extends AnyRequest>(session: Session<R>, peer: string, sink: StreamSink): StreamHandle<R> {
    const id = session.id;
    const conn: Conn = {
      state: session as Session<never>,
      sink,
      blocked: false,
      pending: false,
      changeAt: undefined,
      slot: undefined,
      queued: false,
    };
    this.conns.set(id, conn);
    let opened = false;
    return {
      receive: (req) => {
        if (this.closing) return;
        if (!opened && req.node) {
          opened = true;
          this.observer.streamOpened(req.node.id);
          this.log.info({ stream: id, node: req.node.id, peer, locality: req.node.locality }, 'xds stream opened');
        }
        this.receive(conn, session, req);
      },
      drained: () => {
        conn.blocked = false;
        if (conn.pending) this.schedule(conn);
      },
      closed: () => {
        if (!this.conns.delete(id)) return;
        this.release(conn);
        if (opened) this.observer.streamClosed(conn.state.nodeId);
        this.log.info({ stream: id, node: conn.state.nodeId }, 'xds stream closed');
      },
    };
  }

  /** Services whose resources may have changed; pushed after the debounce. */
  notify(services: Iterable<string>): void {
    for (const s of services) this.changed.add(s);
    const now = Date.now();
    this.firstChangeAt ??= now;
    if (this.timer) clearTimeout(this.timer);
    const wait = Math.max(0, Math.min(this.debounceMs, this.firstChangeAt + this.maxDelayMs - now));
    this.timer = setTimeout(() => this.flush(), wait);
  }

  /** Pushes merged changes now (tests and shutdown). */
  flush(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    const changed = this.changed;
    const at = this.firstChangeAt;
    this.changed = new Set();
    this.firstChangeAt = undefined;
    if (changed.size === 0) return;
    const touched = this.resources.touchedBy(changed);
    for (const conn of this.conns.values()) {
      if (!conn.state.concerns(touched)) continue;
      conn.pending = true;
      conn.changeAt = Math.min(conn.changeAt ?? Infinity, at ?? Date.now());
      this.schedule(conn);
    }
  }

  clients(): ClientStatus[] {
    return [...this.conns.values()].map((c) => c.state.status());
  }

  /** Ends every stream (clients reconnect elsewhere) and stops pushing. */
  close(): void {
    this.closing = true;
    if (this.timer) clearTimeout(this.timer);
    for (const conn of this.conns.values()) conn.sink.end();
  }

  private receive<R>(conn: Conn, session: Session<R>, req: R): void {
    const { outcome, responses } = session.handle(req, this.shared);
    const type = shortTypeName(outcome.typeUrl);
    switch (outcome.kind) {
      case 'ack':
        this.observer.acked(outcome.typeUrl);
        break;
      case 'nack':
        this.observer.nacked(outcome.typeUrl, conn.state.nodeId, outcome.detail);
        this.log.warn(
          { stream: conn.state.id, node: conn.state.nodeId, type, detail: outcome.detail },
          'xds NACK: the client rejected the last response and keeps its previous config',
        );
        break;
      case 'stale':
        this.observer.staleNonce(outcome.typeUrl);
        this.log.debug({ stream: conn.state.id, type, nonce: outcome.nonce }, 'stale nonce ignored');
        break;
      default:
        this.log.debug({ stream: conn.state.id, type, kind: outcome.kind }, 'xds subscribe');
    }
    this.write(conn, responses, undefined);
  }

  /** Pushes now if the stream can take it and the window has room; otherwise it waits its turn. */
  private schedule(conn: Conn): void {
    // Blocked: its drain pushes. Holding a slot: its answer frees the slot and pushes what is pending.
    if (conn.blocked || conn.slot !== undefined || conn.queued) return;
    if (this.window > 0 && this.inFlight >= this.window) {
      conn.queued = true;
      this.waiting.push(conn);
      return;
    }
    this.push(conn);
  }

  private push(conn: Conn): void {
    conn.pending = false;
    const at = conn.changeAt;
    conn.changeAt = undefined;
    const responses = conn.state.refresh(this.shared);
    if (this.window > 0 && responses.length > 0) {
      this.inFlight++;
      conn.slot = setTimeout(() => this.release(conn), this.windowTimeoutMs);
      conn.slot.unref();
    }
    this.write(conn, responses, at, conn.slot ? () => this.release(conn) : undefined);
  }

  /** The push went out (or the stream closed, or the slot timed out): the slot goes to the next stream waiting. */
  private release(conn: Conn): void {
    if (conn.slot === undefined) return;
    clearTimeout(conn.slot);
    conn.slot = undefined;
    this.inFlight--;
    // Streams already waiting go first; this one, if changed again meanwhile, queues behind them.
    while (this.inFlight < this.window && this.waiting.length > 0) {
      const next = this.waiting.shift() as Conn;
      next.queued = false;
      if (next.pending && this.conns.has(next.state.id)) this.schedule(next);
    }
    if (conn.pending && this.conns.has(conn.state.id)) this.schedule(conn);
  }

  private write(
    conn: Conn,
    responses: readonly OutgoingResponse[],
    changeAt: number | undefined,
    flushed?: () => void,
  ): void {
    for (const [i, r] of responses.entries()) {
      const ok = conn.sink.write(r.bytes, i === responses.length - 1 ? flushed : undefined);
      this.observer.responseSent(r.typeUrl, r.resources);
      if (changeAt !== undefined) this.observer.pushed(r.typeUrl, (Date.now() - changeAt) / 1000);
      if (!ok) conn.blocked = true;
    }
  }
}
