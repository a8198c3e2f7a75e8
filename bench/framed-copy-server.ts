/**
 * The servers of the framed-copy benchmark (framed-copy.ts), one per process: each answers every
 * StreamAggregatedResources stream's first request with the same pre-encoded DiscoveryResponse, one
 * shared Buffer, and ends the stream with grpc-status 0 when the client half-closes.
 *
 *   node dist/bench/framed-copy-server.js --kind grpc-js|h2 --response FILE
 *
 * --kind grpc-js: a bare grpc-js server (bare-ads.ts) writing the Buffer with call.write; grpc-js frames
 *   it by allocating len + 5 bytes and copying the message in, per stream.
 * --kind h2: node:http2 speaking gRPC itself (a bench-only test peer): the 5-byte frame header and the
 *   shared Buffer as two writes, no copy; response headers and trailers as grpc-js sends them.
 *
 * Both decode every request as Canopy does. stdout, JSON lines: {"event":"ready","port":…};
 * stdin, lines: `gc` → {"event":"gc","ms":…,"count":…,"byKind":{…},"served":…} since the last `gc`
 * (the main thread's collector pauses, from PerformanceObserver 'gc' entries).
 */
import * as grpc from '@grpc/grpc-js';
import { readFileSync } from 'node:fs';
import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import { PerformanceObserver, constants as perf } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import { decodeDiscoveryRequest } from '../server/src/wire/request.js';
import { ADS_PATH, bareAdsServer, serveHeapGrowth } from './bare-ads.js';

serveHeapGrowth();
const { values } = parseArgs({ options: { kind: { type: 'string' }, response: { type: 'string' } } });
const response = readFileSync(values.response ?? '');
let served = 0;

const GC_KINDS: Record<number, string> = {
  [perf.NODE_PERFORMANCE_GC_MINOR]: 'minor',
  [perf.NODE_PERFORMANCE_GC_MAJOR]: 'major',
  [perf.NODE_PERFORMANCE_GC_INCREMENTAL]: 'incremental',
  [perf.NODE_PERFORMANCE_GC_WEAKCB]: 'weakcb',
};
let gc = { ms: 0, count: 0, byKind: {} as Record<string, number> };
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) {
    const kind = GC_KINDS[((e as { detail?: unknown }).detail as { kind: number }).kind] ?? 'other';
    gc.ms += e.duration;
    gc.count++;
    gc.byKind[kind] = (gc.byKind[kind] ?? 0) + e.duration;
  }
}).observe({ entryTypes: ['gc'] });

function say(obj: object): void {
  process.stdout.write(`${JSON.stringify(obj)}\n`);
}

function grpcJs(): Promise<number> {
  const server = bareAdsServer((call) => {
    let answered = false;
    call.on('data', () => {
      if (answered) return;
      answered = true;
      served++;
      call.write(response);
    });
    call.on('end', () => call.end());
    call.on('error', () => undefined);
  });
  return new Promise((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, port) =>
      err ? reject(err) : resolve(port),
    ),
  );
}

/** The response headers and trailers grpc-js sends. */
const HEADERS = {
  ':status': 200,
  'content-type': 'application/grpc',
  'grpc-accept-encoding': 'identity,deflate,gzip',
  'grpc-encoding': 'identity',
};
const TRAILERS = { 'grpc-status': '0', 'grpc-message': 'OK' };

function frameHeader(length: number): Buffer {
  const h = Buffer.allocUnsafe(5);
  h.writeUInt8(0, 0);
  h.writeUInt32BE(length, 1);
  return h;
}

/** One gRPC stream on node:http2: requests deframed and decoded, the shared response written unframed-copied. */
function serveH2Stream(stream: http2.ServerHttp2Stream, path: string | undefined): void {
  if (path !== ADS_PATH) {
    stream.respond({ ':status': 200, 'content-type': 'application/grpc', 'grpc-status': '12' }, { endStream: true });
    return;
  }
  stream.respond(HEADERS, { waitForTrailers: true });
  stream.on('wantTrailers', () => stream.sendTrailers(TRAILERS));
  let pending: Buffer = Buffer.alloc(0);
  let answered = false;
  stream.on('data', (chunk: Buffer) => {
    pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
    while (pending.length >= 5) {
      const length = pending.readUInt32BE(1);
      if (pending.length < 5 + length) break;
      decodeDiscoveryRequest(pending.subarray(5, 5 + length));
      pending = pending.subarray(5 + length);
      if (answered) continue;
      answered = true;
      served++;
      stream.write(frameHeader(response.length));
      stream.write(response);
    }
  });
  stream.on('end', () => stream.end());
  stream.on('error', () => undefined);
}

function h2(): Promise<number> {
  // As grpc-js configures its http2 server.
  const server = http2.createServer({
    maxSendHeaderBlockLength: Number.MAX_SAFE_INTEGER,
    maxSessionMemory: Number.MAX_SAFE_INTEGER,
  });
  server.on('stream', (stream, headers) => serveH2Stream(stream, headers[':path']));
  server.on('sessionError', () => undefined);
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve((server.address() as AddressInfo).port)));
}

const port = values.kind === 'h2' ? await h2() : await grpcJs();
say({ event: 'ready', port, bytes: response.length });
createInterface({ input: process.stdin }).on('line', (line) => {
  if (line.trim() !== 'gc') return;
  say({ event: 'gc', ...gc, served });
  gc = { ms: 0, count: 0, byKind: {} };
  served = 0;
});
process.stdin.on('end', () => process.exit(0));
