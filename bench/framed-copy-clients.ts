/**
 * The clients of the framed-copy benchmark (framed-copy.ts), in their own process, the same for both
 * servers: K grpc-js streams, each on its own channel and connection, each sending one SotW request and
 * checking that the one response it gets is byte for byte the expected response, then half-closing and
 * waiting for status OK.
 *
 *   node dist/bench/framed-copy-clients.js --target 127.0.0.1:PORT --streams K --response FILE --timeout MS
 *
 * stdout, one JSON line, then exit: {"event":"done","ms":…,"ok":…,"mismatched":…,"failed":…,"timedOut":…},
 * ms from the first stream opened to the last one's OK (or to the timeout).
 */
import * as grpc from '@grpc/grpc-js';
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { ENDPOINT_TYPE } from '../server/src/resources/type-urls.js';
import { fieldSize, utf8Bytes, WireWriter } from '../server/src/wire/wire.js';
import { ADS_PATH } from './bare-ads.js';

const { values } = parseArgs({
  options: {
    target: { type: 'string' },
    streams: { type: 'string', default: '2000' },
    response: { type: 'string' },
    timeout: { type: 'string', default: '120000' },
  },
});
const target = values.target ?? '';
const streams = Number(values.streams);
const expected = readFileSync(values.response ?? '');

/** A first SotW request: node id, the resource name and the type URL. */
function request(i: number): Buffer {
  const id = utf8Bytes(`bench-${i}`);
  const name = utf8Bytes('svc');
  const type = utf8Bytes(ENDPOINT_TYPE);
  const node = new WireWriter(fieldSize(1, id.length)).bytes(1, id).finish();
  const size = fieldSize(2, node.length) + fieldSize(3, name.length) + fieldSize(4, type.length);
  const out = new WireWriter(size).bytes(2, node).bytes(3, name).bytes(4, type).finish();
  return Buffer.from(out.buffer, out.byteOffset, out.byteLength);
}

const tally = { ok: 0, mismatched: 0, failed: 0 };
let finished = 0;
const started = performance.now();
const clients: grpc.Client[] = [];

function done(timedOut: boolean): void {
  process.stdout.write(
    `${JSON.stringify({ event: 'done', ms: performance.now() - started, ...tally, timedOut })}\n`,
    () => {
      for (const c of clients) c.close();
      process.exit(0);
    },
  );
}

const timer = setTimeout(() => done(true), Number(values.timeout));

function settled(): void {
  if (++finished < streams) return;
  clearTimeout(timer);
  done(false);
}

function open(i: number): void {
  // A local subchannel pool: every stream its own connection, as separate workloads would have.
  const client = new grpc.Client(target, grpc.credentials.createInsecure(), {
    'grpc.use_local_subchannel_pool': 1,
    'grpc.max_receive_message_length': 64 * 1024 * 1024,
  });
  clients.push(client);
  const call = client.makeBidiStreamRequest(
    ADS_PATH,
    (b: Buffer) => b,
    (b: Buffer) => b,
  );
  let responses = 0;
  let good = false;
  call.on('data', (b: Buffer) => {
    good = ++responses === 1 && b.equals(expected);
    if (!good) tally.mismatched++;
    call.end();
  });
  call.on('status', (s: grpc.StatusObject) => {
    if (s.code === grpc.status.OK && good) tally.ok++;
    else if (s.code !== grpc.status.OK) tally.failed++;
    settled();
  });
  call.on('error', () => undefined);
  call.write(request(i));
}

for (let i = 0; i < streams; i++) open(i);
