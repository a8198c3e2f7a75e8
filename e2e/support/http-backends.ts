/**
 * HTTP backends on 127.0.0.x that answer with their id and count what they served, over HTTP/1.1 or
 * cleartext HTTP/2 on the same port (an Envoy cluster of `protocol: grpc` speaks HTTP/2), and a bounded
 * load loop that sends requests through an Envoy listener and counts where each landed.
 */
import http from 'node:http';
import http2 from 'node:http2';
import net, { type AddressInfo } from 'node:net';
import { Duplex } from 'node:stream';

export interface HttpBackend {
  readonly id: string;
  readonly host: string;
  readonly port: number;
  /** Requests served since start. */
  served(): number;
  close(): Promise<void>;
}

const H2_PREFACE = 'PRI * HTTP/2.0';

export async function startHttpBackend(host: string, id: string = host): Promise<HttpBackend> {
  let served = 0;
  const answer = (
    req: http.IncomingMessage | http2.Http2ServerRequest,
    res: http.ServerResponse | http2.Http2ServerResponse,
  ) => {
    served++;
    req.resume();
    res.setHeader('content-type', 'text/plain');
    res.end(id);
  };
  const h1 = http.createServer(answer);
  h1.keepAliveTimeout = 30_000;
  const h2 = http2.createServer(answer);
  const sockets = new Set<net.Socket>();
  // One port for both: the first bytes say which (HTTP/2 prior knowledge starts with its preface).
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
    socket.once('data', (first) => {
      if (first.toString('latin1', 0, H2_PREFACE.length) !== H2_PREFACE) {
        socket.unshift(first);
        h1.emit('connection', socket);
        return;
      }
      // nghttp2 reads a net.Socket's handle directly, past bytes already read: give it a stream that
      // starts with them (http2 wraps a plain Duplex itself).
      const wrapped = new Duplex({
        read: () => socket.resume(),
        write: (chunk: Buffer, _enc, cb) => socket.write(chunk, cb),
        final: (cb) => socket.end(cb),
        destroy: (err, cb) => {
          socket.destroy();
          cb(err);
        },
      });
      wrapped.push(first);
      socket.on('data', (d: Buffer) => {
        if (!wrapped.push(d)) socket.pause();
      });
      socket.on('end', () => wrapped.push(null));
      socket.on('error', (err) => wrapped.destroy(err));
      h2.emit('connection', wrapped);
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host, () => resolve());
  });
  return {
    id,
    host,
    port: (server.address() as AddressInfo).port,
    served: () => served,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        h2.close();
        server.close(() => resolve());
      }),
  };
}

export interface Tally {
  /** Responses by backend id (the body of a 200). */
  readonly by: Map<string, number>;
  /** Failed requests: a status other than 200 (`503`), or a transport error (`ECONNRESET`). */
  readonly failed: Map<string, number>;
  readonly sent: number;
}

export function failures(t: Tally): number {
  return [...t.failed.values()].reduce((a, b) => a + b, 0);
}

/** `n` requests to http://target/ with `concurrency` in flight over keep-alive connections, within `ms`. */
export function sendRequests(
  target: string,
  n: number,
  opts: { concurrency?: number; ms?: number; host?: string; headers?: Record<string, string> } = {},
): Promise<Tally> {
  const deadline = Date.now() + (opts.ms ?? 30_000);
  let next = 0;
  return drive(target, () => next++ < n && Date.now() < deadline, opts);
}

/**
 * Requests in a loop until stopped (bounded by `maxMs`), for changes made under steady traffic: the tally
 * of everything sent.
 */
export function steadyTraffic(
  target: string,
  opts: { concurrency?: number; maxMs?: number; host?: string; headers?: Record<string, string> } = {},
): { stop(): Promise<Tally>; sent(): number } {
  let stopped = false;
  let sent = 0;
  const deadline = Date.now() + (opts.maxMs ?? 60_000);
  const run = drive(target, () => !stopped && Date.now() < deadline && ++sent > 0, { concurrency: 2, ...opts });
  return {
    sent: () => sent,
    stop: () => {
      stopped = true;
      return run;
    },
  };
}

async function drive(
  target: string,
  more: () => boolean,
  opts: { concurrency?: number; host?: string; headers?: Record<string, string> },
): Promise<Tally> {
  const [hostname, port] = splitTarget(target);
  const concurrency = opts.concurrency ?? 8;
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
  const by = new Map<string, number>();
  const failed = new Map<string, number>();
  let sent = 0;
  const count = (m: Map<string, number>, key: string) => m.set(key, (m.get(key) ?? 0) + 1);
  const one = () =>
    new Promise<void>((resolve) => {
      const req = http.request(
        { hostname, port, path: '/', agent, headers: { host: opts.host ?? 'svc', ...opts.headers }, timeout: 5000 },
        (res) => {
          let body = '';
          res.setEncoding('utf8');
          res.on('data', (d: string) => (body += d));
          res.on('end', () => {
            if (res.statusCode === 200) count(by, body);
            // Envoy's local replies say why (no healthy upstream, upstream reset, …).
            else count(failed, `${res.statusCode} ${body.slice(0, 140)} @${new Date().toISOString().slice(17, 23)}`);
            resolve();
          });
        },
      );
      req.on('timeout', () => req.destroy(Object.assign(new Error('timeout'), { code: 'ETIMEDOUT' })));
      req.on('error', (err: NodeJS.ErrnoException) => {
        count(failed, err.code ?? err.message);
        resolve();
      });
      req.end();
    });
  const worker = async () => {
    while (more()) {
      sent++;
      await one();
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  agent.destroy();
  return { by, failed, sent };
}

export function merge(tallies: readonly Tally[]): Tally {
  const by = new Map<string, number>();
  const failed = new Map<string, number>();
  let sent = 0;
  for (const t of tallies) {
    sent += t.sent;
    for (const [k, v] of t.by) by.set(k, (by.get(k) ?? 0) + v);
    for (const [k, v] of t.failed) failed.set(k, (failed.get(k) ?? 0) + v);
  }
  return { by, failed, sent };
}

function splitTarget(target: string): [string, number] {
  const i = target.lastIndexOf(':');
  return [target.slice(0, i), Number(target.slice(i + 1))];
}
