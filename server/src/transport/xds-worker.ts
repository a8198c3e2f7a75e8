/**
 * One xDS worker thread: it listens on the xDS port with the others (SO_REUSEPORT: the kernel spreads the
 * connections), hands each connection to its own grpc-js server (`createConnectionInjector`, grpc-js's
 * public API for sockets it did not accept) and carries the calls for the main thread: it decodes the
 * requests and writes the responses (TLS, HTTP/2, gRPC framing), and the main thread decides everything
 * else (worker-messages.ts). The responses' bytes arrive in shared memory, the same bytes for every stream.
 */
import * as grpc from '@grpc/grpc-js';
import net from 'node:net';
import { parentPort, workerData } from 'node:worker_threads';
import { fullCollection } from '../platform/full-collection.js';
import { DEFAULT_COLLECT_AFTER_BYTES, DEFAULT_COLLECT_IDLE_MS, IdleCollector } from '../sessions/idle-collector.js';
import { serverCredentials, xdsServiceDefinitions } from './grpc-server.js';
import {
  asBuffer,
  Batch,
  tight,
  type CallInfo,
  type MainOp,
  type ToWorker,
  type WorkerEvent,
  type WorkerStart,
} from './worker-messages.js';

type StreamCall = grpc.ServerDuplexStream<unknown, unknown>;
type UnaryCall = grpc.ServerUnaryCall<unknown, unknown>;

const start = workerData as WorkerStart;
const port = parentPort!;
const events = new Batch<WorkerEvent>((items) => port.postMessage({ events: items }));
const streams = new Map<number, StreamCall>();
const unaries = new Map<number, grpc.sendUnaryData<unknown>>();
let nextId = 1;
/**
 * grpc-js's framed copy of every response is this thread's garbage now: a collection once writing stops
 * after a burst, as the main thread runs one for its own (sessions/idle-collector.ts), or the copies
 * (and the shared responses they were made from) stay in RSS until the next burst.
 */
const collector = new IdleCollector(fullCollection(), DEFAULT_COLLECT_AFTER_BYTES, DEFAULT_COLLECT_IDLE_MS);
let writing = 0;

/** One message to each of the calls `ids`: one Buffer over the shared bytes, whatever the calls. */
function write(ids: readonly number[], msg: unknown): void {
  const bytes = asBuffer(msg);
  const size = Buffer.isBuffer(bytes) ? bytes.length : 0;
  for (const id of ids) {
    const call = streams.get(id);
    // The stream is gone: a write still gets its callback, so the main thread's pipeline carries on.
    if (!call) {
      events.push({ t: 'flushed', ids: [id] });
      continue;
    }
    writing++;
    collector.wrote(size);
    call.write(bytes, () => {
      events.push({ t: 'flushed', ids: [id] });
      if (--writing === 0) collector.idle();
    });
  }
}

function infoOf(call: StreamCall | UnaryCall, path: string): CallInfo {
  const san = call.getAuthContext()?.sslPeerCertificate?.subjectaltname;
  return {
    path,
    peer: call.getPeer(),
    metadata: Object.fromEntries(
      Object.entries(call.metadata.toJSON()).map(([k, vs]) => [k, vs.filter((v) => typeof v === 'string')]),
    ),
    ...(san !== undefined ? { subjectaltname: san } : {}),
  };
}

function streamHandler(path: string): grpc.UntypedHandleCall {
  return (call: StreamCall) => {
    const id = nextId++;
    streams.set(id, call);
    events.push({ t: 'open', id, ...infoOf(call, path) });
    call.on('data', (msg: unknown) => events.push({ t: 'data', id, msg: tight(msg) }));
    call.on('end', () => events.push({ t: 'end', id }));
    call.on('cancelled', () => events.push({ t: 'cancelled', id }));
    const closed = (): void => {
      if (!streams.delete(id)) return;
      events.push({ t: 'closed', id });
    };
    call.on('error', closed);
    call.on('close', closed);
  };
}

function unaryHandler(path: string): grpc.UntypedHandleCall {
  return (call: UnaryCall, callback: grpc.sendUnaryData<unknown>) => {
    const id = nextId++;
    unaries.set(id, callback);
    events.push({ t: 'unary', id, request: tight(call.request), ...infoOf(call, path) });
  };
}

function apply(op: MainOp): void {
  if (op.t === 'reply') {
    const callback = unaries.get(op.id);
    unaries.delete(op.id);
    const v = op.value as { error?: { code: number; details: string }; value?: unknown };
    callback?.(v.error ? { code: v.error.code, details: v.error.details } : null, v.value);
    return;
  }
  if (op.t === 'write') return write(op.ids, op.msg);
  const call = streams.get(op.id);
  if (!call) return;
  if (op.t === 'end') call.end();
  else call.emit('error', { code: op.code, details: op.details });
}

const server = new grpc.Server(start.serverOptions);
for (const definition of xdsServiceDefinitions(start.withLoad)) {
  const handlers: grpc.UntypedServiceImplementation = {};
  for (const [name, method] of Object.entries(definition)) {
    handlers[name] = method.requestStream ? streamHandler(method.path) : unaryHandler(method.path);
  }
  server.addService(definition, handlers);
}
const tls = start.tls
  ? {
      cert: Buffer.from(start.tls.cert),
      key: Buffer.from(start.tls.key),
      ...(start.tls.clientCa ? { clientCa: Buffer.from(start.tls.clientCa) } : {}),
    }
  : undefined;
const injector = server.createConnectionInjector(serverCredentials(tls));
const listener = net.createServer((socket) => injector.injectConnection(socket));
listener.on('error', (err) => port.postMessage({ t: 'failed', message: err.message }));
listener.listen({ host: start.host, port: start.port, reusePort: true }, () => {
  const bound = listener.address();
  port.postMessage({ t: 'listening', port: typeof bound === 'object' && bound ? bound.port : start.port });
});

port.on('message', (m: ToWorker) => {
  if ('ops' in m) {
    for (const op of m.ops) apply(op);
    return;
  }
  if (m.t !== 'stop') return;
  listener.close();
  const done = (): void => {
    events.flush();
    port.postMessage({ t: 'stopped' });
  };
  const force = setTimeout(() => {
    injector.destroy();
    server.forceShutdown();
    done();
  }, m.graceMs);
  injector.drain(m.graceMs);
  server.tryShutdown(() => {
    clearTimeout(force);
    done();
  });
});
