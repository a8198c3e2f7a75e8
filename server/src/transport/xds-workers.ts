/**
 * xDS served from worker threads (`--xds-workers N`, N ≥ 2): each worker owns a share of the connections
 * and grpc-js's work on them (xds-worker.ts); the calls' handlers run here, on the main thread, the same
 * handlers one thread serves with (grpc-server.ts `xdsServices`), each given a `RemoteCall` that stands for
 * the worker's call. So the store, the mesh, the CLA cache, the pipeline's push order and every decision
 * (budget, access, CSDS, LRS, NACK accounting, metrics) stay one, and only the wire work is spread.
 *
 * A response is copied into shared memory once (`sharedBytes`), and every stream of every worker writes
 * those same bytes: never re-encoded per worker, never copied per stream.
 */
import * as grpc from '@grpc/grpc-js';
import { EventEmitter } from 'node:events';
import net from 'node:net';
import { Worker } from 'node:worker_threads';
import { CodedError } from '../domain/errors.js';
import { encodeResponsesShared } from '../wire/envelope.js';
import { xdsServices, type GrpcTransport, type TransportOptions } from './grpc-server.js';
import {
  asBuffer,
  Batch,
  tight,
  type CallInfo,
  type MainOp,
  type ToMain,
  type WorkerEvent,
  type WorkerStart,
} from './worker-messages.js';

/** Responses at least this big go to the workers in shared memory; smaller ones are copied (cheaper). */
const SHARE_FROM_BYTES = 16 * 1024;
const shared = new WeakMap<Buffer, Uint8Array>();

/**
 * The bytes in shared memory: responses are encoded there (`encodeResponsesShared`) and pass as they are;
 * any other Buffer is copied once, whatever the streams and workers it goes to.
 */
export function sharedBytes(bytes: Buffer): Uint8Array {
  if (bytes.length < SHARE_FROM_BYTES || bytes.buffer instanceof SharedArrayBuffer) return bytes;
  let view = shared.get(bytes);
  if (!view) {
    view = new Uint8Array(new SharedArrayBuffer(bytes.length));
    view.set(bytes);
    shared.set(bytes, view);
  }
  return view;
}

/** The worker's call, as the handlers see it: events from the worker, writes and statuses to it. */
class RemoteCall extends EventEmitter {
  readonly metadata = new grpc.Metadata();
  private readonly flushed: (() => void)[] = [];
  private ended = false;

  constructor(
    private readonly info: CallInfo,
    private readonly op: (op: MainOp) => void,
    readonly id: number,
    readonly request?: unknown,
  ) {
    super();
    for (const [key, values] of Object.entries(info.metadata)) for (const v of values) this.metadata.add(key, v);
  }

  getPeer(): string {
    return this.info.peer;
  }

  getAuthContext(): { sslPeerCertificate?: { subjectaltname: string } } {
    const san = this.info.subjectaltname;
    return san !== undefined ? { sslPeerCertificate: { subjectaltname: san } } : {};
  }

  write(msg: unknown, flushed?: () => void): boolean {
    if (this.ended) return false;
    this.flushed.push(flushed ?? (() => {}));
    this.op({ t: 'write', ids: [this.id], msg: Buffer.isBuffer(msg) ? tight(sharedBytes(msg)) : msg });
    return true;
  }

  end(): void {
    if (this.ended) return;
    this.ended = true;
    this.op({ t: 'end', id: this.id });
  }

  /** A handler ends the call with a status by emitting it as an error, as on a grpc-js call. */
  override emit(event: string | symbol, ...args: unknown[]): boolean {
    const status = args[0] as { code?: number; details?: string } | undefined;
    if (event === 'error' && typeof status?.code === 'number' && !this.ended) {
      this.ended = true;
      this.op({ t: 'status', id: this.id, code: status.code, details: status.details ?? '' });
    }
    return super.emit(event, ...args);
  }

  /** The worker flushed this call's oldest write. */
  flush(): void {
    this.flushed.shift()?.();
  }

  /** What the worker reports of its call. */
  deliver(e: Extract<WorkerEvent, { t: 'data' | 'end' | 'cancelled' | 'closed' }>): void {
    if (e.t === 'data') super.emit('data', asBuffer(e.msg));
    else if (e.t === 'end') super.emit('end');
    else if (e.t === 'cancelled') super.emit('cancelled');
    else if (e.t === 'closed') {
      this.ended = true;
      super.emit('close');
    }
  }
}

type Handler = (call: RemoteCall, callback?: (err: unknown, value?: unknown) => void) => void;

/** One worker: its thread, its calls, and the batch of what is sent to it. */
class XdsWorker {
  readonly calls = new Map<number, RemoteCall>();
  private readonly ops: Batch<MainOp>;

  constructor(
    readonly thread: Worker,
    private readonly handlers: ReadonlyMap<string, Handler>,
  ) {
    this.ops = new Batch((items) => thread.postMessage({ ops: items }));
    // A worker that dies takes its connections with it (their clients reconnect, to the others): its
    // calls close here too, so the pipeline lets go of their streams.
    thread.once('exit', () => {
      for (const call of this.calls.values()) call.deliver({ t: 'closed', id: call.id });
      this.calls.clear();
    });
  }

  /** Sends what is queued now (before a control message, which must come after it). */
  flushOps(): void {
    this.ops.flush();
  }

  receive(events: readonly WorkerEvent[]): void {
    for (const e of events) {
      if (e.t === 'open' || e.t === 'unary') this.start(e);
      else if (e.t === 'flushed') for (const id of e.ids) this.calls.get(id)?.flush();
      else this.calls.get(e.id)?.deliver(e);
      if (e.t === 'closed') this.calls.delete(e.id);
    }
  }

  private start(e: Extract<WorkerEvent, { t: 'open' | 'unary' }>): void {
    const send = (op: MainOp): void => this.ops.push(op);
    const handler = this.handlers.get(e.path);
    if (e.t === 'unary') {
      const call = new RemoteCall(e, send, e.id, asBuffer(e.request));
      const reply = (err: unknown, value?: unknown): void => {
        const error = err as { code?: number; details?: string } | null;
        send({
          t: 'reply',
          id: e.id,
          value: error ? { error: { code: error.code ?? 2, details: error.details ?? '' } } : { value },
        });
      };
      if (!handler) return reply({ code: grpc.status.UNIMPLEMENTED, details: e.path });
      return handler(call, reply);
    }
    const call = new RemoteCall(e, send, e.id);
    this.calls.set(e.id, call);
    if (!handler) return void call.emit('error', { code: grpc.status.UNIMPLEMENTED, details: e.path });
    handler(call);
  }
}

/** Starts `workers` threads on the xDS port and serves their calls with this thread's handlers. */
export async function startWorkerTransport(opts: TransportOptions, workers: number): Promise<GrpcTransport> {
  const { services, serverOptions } = xdsServices(opts);
  const handlers = new Map<string, Handler>();
  for (const [definition, impl] of services) {
    for (const [name, method] of Object.entries(definition))
      handlers.set(method.path, impl[name] as unknown as Handler);
  }
  const tls = opts.tls
    ? { cert: opts.tls.cert, key: opts.tls.key, ...(opts.tls.clientCa ? { clientCa: opts.tls.clientCa } : {}) }
    : undefined;
  const base = {
    host: opts.host,
    serverOptions: serverOptions as Record<string, string | number>,
    withLoad: opts.load !== undefined,
    ...(tls ? { tls } : {}),
  };
  const pool: XdsWorker[] = [];
  let port = opts.port;
  // Responses encoded into shared memory from the start: `sharedBytes` then has nothing to copy.
  encodeResponsesShared(SHARE_FROM_BYTES);
  // reusePort would let this server join another one's sockets on the port (same user): listening
  // once without it first finds the port taken, as the one-thread transport would.
  if (port !== 0) await portFree(opts.host, port);
  try {
    // The first picks the port (0: any free one); the others listen on the same one.
    for (let i = 0; i < workers; i++) {
      const w = await startWorker({ ...base, port }, handlers);
      pool.push(w.worker);
      port = w.port;
    }
  } catch (err) {
    encodeResponsesShared(Infinity);
    await Promise.all(pool.map((w) => w.thread.terminate()));
    throw err;
  }
  return {
    port,
    threads: () => pool.map((w) => w.calls.size),
    stop: async (graceMs) => {
      opts.ads.close();
      await Promise.all(pool.map((w) => stopWorker(w, graceMs)));
      encodeResponsesShared(Infinity);
    },
  };
}

function portFree(host: string, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const probe = net.createServer();
    probe.once('error', (err) =>
      reject(new CodedError('CANOPY_XDS_WORKER_FAILED', `the xDS port ${host}:${port} is taken: ${err.message}`)),
    );
    probe.listen({ host, port }, () => probe.close(() => resolve()));
  });
}

async function startWorker(
  start: WorkerStart,
  handlers: ReadonlyMap<string, Handler>,
): Promise<{ worker: XdsWorker; port: number }> {
  const thread = new Worker(new URL('./xds-worker.js', import.meta.url), { workerData: start });
  const worker = new XdsWorker(thread, handlers);
  const port = await new Promise<number>((resolve, reject) => {
    const failed = (err: Error): void =>
      reject(new CodedError('CANOPY_XDS_WORKER_FAILED', `an xDS worker did not start: ${err.message}`));
    thread.once('error', failed);
    thread.on('message', (m: ToMain) => {
      if ('events' in m) return worker.receive(m.events);
      if (m.t === 'listening') {
        thread.off('error', failed);
        resolve(m.port);
      } else if (m.t === 'failed') failed(new CodedError('CANOPY_XDS_WORKER_FAILED', m.message));
    });
  });
  return { worker, port };
}

function stopWorker(w: XdsWorker, graceMs: number): Promise<void> {
  return new Promise<void>((resolve) => {
    const done = (): void => {
      clearTimeout(force);
      void w.thread.terminate().then(() => resolve());
    };
    const force = setTimeout(done, graceMs + 1000);
    w.thread.on('message', (m: ToMain) => {
      if (!('events' in m) && m.t === 'stopped') done();
    });
    // The ends the pipeline just queued go first: the worker's graceful shutdown waits for its calls.
    w.flushOps();
    w.thread.postMessage({ t: 'stop', graceMs });
  });
}
