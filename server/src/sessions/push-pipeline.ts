/**
 * The ADS push pipeline, without gRPC: streams come and go through `open` and
 * `openDelta`, changes arrive through `notify`; the first change on a quiet mesh
 * is pushed at once, a burst debounced and merged (push-debounce.ts), and
 * each stream has at most one response in the transport at a time: the next
 * one (an answer to the client's own request, or the next type of a push) is
 * computed only when the previous write has been flushed. A client that stops
 * reading therefore holds one response, however many changes or requests
 * come; what it missed is computed from the current state when it reads again.
 *
 * Responses are encoded once per push and shared by every stream that needs
 * the same bytes (shared-responses.ts), and at most `pushWindow` streams have
 * a response in the transport (written, not yet flushed): the others wait by
 * response, each group back to back (push-window.ts). Answers to a client's
 * own requests take the window too: thousands of streams (re)connecting at
 * once would otherwise hold a whole CLA each until their clients read it.
 * What a request's outcome and a response's size tell the operator is
 * counted and logged in stream-reports.ts.
 */
import type { MeshChange } from '../domain/mesh.js';
import type { ResourceRegistry } from '../resources/registry.js';
import type { ResourceTypes } from '../resources/resource-type.js';
import type { DeltaDiscoveryRequest, DiscoveryRequest, NodeInfo } from '../wire/request.js';
import type { ClientStatus, OversizedRecord } from './client-status.js';
import { DeltaSession } from './delta-session.js';
import { nullObserver, type XdsObserver } from './observer.js';
import { DEFAULT_LIMITS, type OutgoingResponse, type Session, type SessionLimits } from './session.js';
import { DEFAULT_COLLECT_AFTER_BYTES, DEFAULT_COLLECT_IDLE_MS, IdleCollector } from './idle-collector.js';
import { pushDelay } from './push-debounce.js';
import { PushWindow } from './push-window.js';
import { PushResponses } from './shared-responses.js';
import { SotwSession } from './sotw-session.js';
import type { StreamHandle, StreamSink, XdsLog } from './stream-sink.js';
import { StreamReports } from './stream-reports.js';
import { StreamLog } from './stream-log.js';

/** gRPC's default receive limit: a bigger response ends the stream of a client that kept the default. */
export const DEFAULT_MAX_RECEIVE_BYTES = 4 * 1024 * 1024;

const silent: XdsLog = { info() {}, warn() {}, debug() {} };

export interface PushPipelineOptions {
  readonly resources: ResourceRegistry;
  readonly observer?: XdsObserver;
  readonly log?: XdsLog;
  /** Quiet period that merges a burst of changes into one push (default 100 ms); a change on a quiet mesh goes at once. */
  readonly debounceMs?: number;
  /** A push is never held back longer than this by a steady stream of changes (default 10 × debounce). */
  readonly maxDelayMs?: number;
  /** What one stream may hold (names per type, name length). */
  readonly limits?: SessionLimits;
  /** Responses over this size are reported (default 4 MiB, gRPC's default receive limit). */
  readonly warnResponseBytes?: number;
  /** At most this many streams have a response handed to the transport, not yet flushed (0: no window; default 256). */
  readonly pushWindow?: number;
  /** A slot whose push has not gone out by then is freed anyway (default 10 s). */
  readonly pushWindowTimeoutMs?: number;
  /** Encoded responses held strongly, least recently used first out (default 32 MiB; shared-responses.ts). */
  readonly sharedBytes?: number;
  /** Responses held for the current state, answers and pushes, until a change touches them (default 256 MiB). */
  readonly sharedAnswerBytes?: number;
  /** How long a push's responses stay held once writing stops (default 1 s; shared-responses.ts). */
  readonly sharedGraceMs?: number;
  /** A full garbage collection, run once writing stops after a big burst (idle-collector.ts). */
  readonly collect?: () => void;
  readonly collectAfterBytes?: number;
  readonly collectIdleMs?: number;
  /** Where a service came from (a file, the API, a Kubernetes object), named in a NACK's log line. */
  readonly originOf?: (service: string) => string | undefined;
}

/** What the pipeline reads of a request of either protocol. */
interface AnyRequest {
  readonly node?: NodeInfo;
}

interface Conn {
  readonly session: Session<never>;
  readonly sink: StreamSink;
  /** A response is in the transport: nothing more is written until it is flushed. */
  writing: boolean;
  closed: boolean;
  /** Types whose answer to the client's own request is due: true when due even if nothing changed. */
  readonly due: Map<string, boolean>;
  /** The one pending push: the types it has still to bring up to date, in push order. */
  pushTypes: string[] | undefined;
  /** Changed again while holding a slot: the slot is given back before the new push, which queues behind those waiting. */
  requeue: boolean;
  /** When the oldest change not yet sent to this stream happened. */
  changeAt: number | undefined;
  ignoredWarned: boolean;
  oversized: OversizedRecord | undefined;
  /** Holds a slot of the push window until its push is flushed (or the stream closes, or the slot times out). */
  slot: NodeJS.Timeout | undefined;
  /** Waiting in the window's queue. */
  queued: boolean;
  /** The share key worked out when the pending push started (the window queues by it), until the push is done. */
  pushGroup: string | undefined;
  /** Streams with the same share key get the same bytes: the window lets them through together. */
  readonly group: () => string;
}

/** Where the mesh's changes come from: the store's MeshFeed (store/mesh-feed.ts). */
export interface MeshChanges {
  subscribe(listener: (changes: readonly MeshChange[]) => void): () => void;
}

export class PushPipeline {
  private readonly conns = new Map<number, Conn>();
  private nextId = 1;
  private readonly resources: ResourceRegistry;
  private readonly observer: XdsObserver;
  private readonly log: XdsLog;
  private readonly debounceMs: number;
  private readonly maxDelayMs: number;
  private readonly limits: SessionLimits;
  private changed = new Set<string>();
  private firstChangeAt: number | undefined;
  private lastPushAt: number | undefined;
  /** The pending push is a leading edge's (a change on a quiet mesh): changes until it fires join it. */
  private leadingDue = false;
  private timer: NodeJS.Timeout | undefined;
  private closing = false;
  /** Streams in the same state get byte-identical responses: each is encoded once per push (shared-responses.ts). */
  private readonly shared: PushResponses;
  private readonly window: PushWindow<Conn>;
  private readonly collector: IdleCollector | undefined;
  private readonly streamLog: StreamLog;
  private readonly reports: StreamReports;

  constructor(opts: PushPipelineOptions) {
    this.resources = opts.resources;
    this.observer = opts.observer ?? nullObserver;
    this.log = opts.log ?? silent;
    this.streamLog = new StreamLog(this.log, () => this.conns.size);
    this.debounceMs = opts.debounceMs ?? 100;
    this.maxDelayMs = opts.maxDelayMs ?? this.debounceMs * 10;
    this.limits = opts.limits ?? DEFAULT_LIMITS;
    const warnBytes = opts.warnResponseBytes ?? DEFAULT_MAX_RECEIVE_BYTES;
    this.reports = new StreamReports(this.observer, this.log, opts.originOf ?? (() => undefined), warnBytes);
    this.shared = new PushResponses(opts.sharedBytes, opts.sharedGraceMs, opts.sharedAnswerBytes);
    this.collector = opts.collect
      ? new IdleCollector(
          opts.collect,
          opts.collectAfterBytes ?? DEFAULT_COLLECT_AFTER_BYTES,
          opts.collectIdleMs ?? DEFAULT_COLLECT_IDLE_MS,
        )
      : undefined;
    this.window = new PushWindow<Conn>(opts.pushWindow ?? 256, opts.pushWindowTimeoutMs ?? 10_000, (conn) => {
      if (this.conns.has(conn.session.id)) this.drive(conn);
    });
  }

  /** Streams with a response in the transport, not yet flushed (at most `pushWindow`). */
  get pushesInFlight(): number {
    return this.window.held;
  }

  get connected(): number {
    return this.conns.size;
  }

  /** A state-of-the-world stream (StreamAggregatedResources); `types`: what this client may read, if not all. */
  open(peer: string, sink: StreamSink, types: ResourceTypes = this.resources): StreamHandle<DiscoveryRequest> {
    return this.openSession(new SotwSession(this.nextId++, peer, types, this.limits), peer, sink);
  }

  /** An incremental stream (DeltaAggregatedResources). */
  openDelta(
    peer: string,
    sink: StreamSink,
    types: ResourceTypes = this.resources,
  ): StreamHandle<DeltaDiscoveryRequest> {
    return this.openSession(new DeltaSession(this.nextId++, peer, types, this.limits), peer, sink);
  }

  /**
   * Pushes what each change of the served mesh touches (the store's MeshFeed): a deleted service's leftovers
   * are forgotten in every type, and the changed services pushed after the debounce. Returns a function that stops.
   */
  follow(feed: MeshChanges): () => void {
    return feed.subscribe((changes) => {
      for (const c of changes) if (c.kind === 'deleted') this.resources.forget(c.service);
      // A deletion waits for the debounce: a re-creation right after it is merged into the same push.
      this.notify(
        changes.map((c) => c.service),
        changes.every((c) => c.kind !== 'deleted'),
      );
    });
  }

  /** Services whose resources may have changed; pushed at once on a quiet mesh (if `mayLead`), else after the debounce. */
  notify(services: Iterable<string>, mayLead = true): void {
    for (const s of services) this.changed.add(s);
    const now = Date.now();
    this.firstChangeAt ??= now;
    const state = {
      firstChangeAt: this.firstChangeAt,
      lastPushAt: this.lastPushAt,
      leadingDue: this.leadingDue,
      mayLead,
    };
    const wait = pushDelay(state, now, this.debounceMs, this.maxDelayMs);
    if (wait === 'keep') return;
    if (this.timer) clearTimeout(this.timer);
    this.leadingDue = wait === 0;
    this.timer = setTimeout(() => this.flush(), wait);
  }

  /** Pushes merged changes now (tests and shutdown). */
  flush(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.leadingDue = false;
    const changed = this.changed;
    const at = this.firstChangeAt;
    this.changed = new Set();
    this.firstChangeAt = undefined;
    if (changed.size === 0) return;
    const touched = this.resources.touchedBy(changed);
    this.shared.newPush(touched);
    // By response: streams that get the same bytes back to back, so each encoding is needed only while its group goes out.
    const groups = new Map<string, Conn[]>();
    for (const conn of this.conns.values()) {
      if (!conn.session.concerns(touched)) continue;
      // Worked out against the state this push sends (a tree node's key can change with the tree).
      const g = (conn.pushGroup = conn.session.shareKey?.() ?? '');
      const list = groups.get(g);
      if (list) list.push(conn);
      else groups.set(g, [conn]);
    }
    // The debounce spaces pushes to streams: a change no stream holds leaves the mesh quiet for them.
    if (groups.size > 0) this.lastPushAt = Date.now();
    for (const list of groups.values()) {
      for (const conn of list) {
        // Merged into the pending push, if any: it starts over from the first type, with the state as it is now.
        if (conn.slot !== undefined) conn.requeue = true;
        conn.pushTypes = conn.session.pushOrder();
        conn.changeAt = Math.min(conn.changeAt ?? Infinity, at ?? Date.now());
        this.drive(conn);
      }
    }
  }

  /** Every stream's state; at most `maxNames` names and resources listed per type (bounded for /debug/clients). */
  clients(maxNames = 1000): ClientStatus[] {
    return [...this.conns.values()].map((c) => {
      const status = c.session.status(maxNames);
      return c.oversized ? { ...status, oversized: c.oversized } : status;
    });
  }

  /** Ends every stream (clients reconnect elsewhere) and stops pushing. */
  close(): void {
    this.closing = true;
    if (this.timer) clearTimeout(this.timer);
    this.collector?.stop();
    for (const conn of this.conns.values()) conn.sink.end();
    this.streamLog.summarise();
  }

  private openSession<R extends AnyRequest>(session: Session<R>, peer: string, sink: StreamSink): StreamHandle<R> {
    const id = session.id;
    const conn: Conn = {
      session: session as Session<never>,
      sink,
      writing: false,
      closed: false,
      due: new Map(),
      pushTypes: undefined,
      requeue: false,
      changeAt: undefined,
      ignoredWarned: false,
      oversized: undefined,
      slot: undefined,
      queued: false,
      pushGroup: undefined,
      group: () => conn.pushGroup ?? session.shareKey?.() ?? '',
    };
    this.conns.set(id, conn);
    let opened = false;
    return {
      receive: (req) => {
        if (this.closing || conn.closed) return;
        if (!opened && req.node) {
          opened = true;
          this.observer.streamOpened(req.node.id);
          this.streamLog.streamOpened({ stream: id, node: req.node.id, peer, locality: req.node.locality });
        }
        this.receive(conn, session, req);
      },
      closed: () => {
        conn.closed = true;
        if (!this.conns.delete(id)) return;
        this.window.release(conn);
        conn.session.closed?.();
        if (opened) this.observer.streamClosed(conn.session.nodeId);
        this.streamLog.streamClosed({ stream: id, node: conn.session.nodeId });
      },
    };
  }

  private receive<R>(conn: Conn, session: Session<R>, req: R): void {
    const { outcome, answer } = session.receive(req);
    this.reports.outcome(conn, outcome);
    if (outcome.kind === 'ignored') return;
    if (outcome.kind === 'rejected') {
      conn.closed = true;
      this.window.release(conn);
      conn.sink.reject(outcome.detail);
      return;
    }
    if (answer !== undefined) conn.due.set(outcome.typeUrl, answer || conn.due.get(outcome.typeUrl) === true);
    this.takeDue(conn);
    if (conn.due.size > 0) this.drive(conn);
  }

  /** What the session made due besides its answer (warming, a grown demand set) is answered next, in order. */
  private takeDue(conn: Conn): void {
    const due = conn.session.takeDue?.();
    if (due) for (const t of due) if (!conn.due.has(t)) conn.due.set(t, false);
  }

  /** Writes the next response when the transport holds none; continues when that one is flushed. */
  private drive(conn: Conn): void {
    while (!conn.writing && !conn.closed) {
      const next = this.next(conn);
      if (!next) return;
      const { response, changeAt } = next;
      conn.writing = true;
      this.collector?.wrote(response.bytes.length);
      let inside = true;
      conn.sink.write(response.bytes, () => {
        conn.writing = false;
        // Called back later (the usual case): carry on from here; called at once: the loop carries on.
        if (!inside) this.drive(conn);
      });
      inside = false;
      this.observer.responseSent(response.typeUrl, response.count ?? response.names.length);
      if (changeAt !== undefined) this.observer.pushed(response.typeUrl, (Date.now() - changeAt) / 1000);
      this.reports.wrote(conn, response);
    }
  }

  /** Answers to the client's own requests first, then the next type of the pending push; both take a window slot. */
  private next(conn: Conn): { response: OutgoingResponse; changeAt: number | undefined } | undefined {
    for (const [typeUrl, mustAnswer] of conn.due) {
      // Answers wait for the window too: a first answer is as big as a push (a whole CLA), and thousands
      // of streams connecting at once would otherwise each hold one in the transport until read.
      if (!this.window.take(conn)) return undefined;
      conn.due.delete(typeUrl);
      const response = conn.session.respond(typeUrl, mustAnswer, this.shared.answers);
      this.takeDue(conn);
      if (response) return { response, changeAt: undefined };
    }
    if (conn.requeue) {
      conn.requeue = false;
      this.window.release(conn);
    }
    while (conn.pushTypes && conn.pushTypes.length > 0) {
      if (!this.window.take(conn)) return undefined;
      const typeUrl = conn.pushTypes.shift()!;
      const response = conn.session.respond(typeUrl, false, this.shared);
      // Made due by this response (a Cluster's CLA for Envoy's warming): sent next, before the push goes on.
      this.takeDue(conn);
      if (response) return { response, changeAt: conn.changeAt };
      if (conn.due.size > 0) return this.next(conn);
    }
    conn.pushTypes = conn.changeAt = conn.pushGroup = undefined;
    // The last response has been flushed (or there was nothing to send): the slot goes to the next stream.
    this.window.release(conn);
    if (this.window.idle) {
      this.shared.idle();
      this.collector?.idle();
    }
    return undefined;
  }
}
