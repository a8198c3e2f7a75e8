/**
 * The far side of the fan-out benchmark, in its own process: K ADS streams,
 * each on its own grpc-js channel and TCP connection (as K real clients would
 * be), each subscribed to one service's ClusterLoadAssignment from its own
 * locality, ACKing every response as soon as it arrives.
 *
 *   node dist/bench/fanout-clients.js --target 127.0.0.1:PORT --streams K --localities L --service NAME
 *
 * stdout, JSON lines: {"event":"ready","streams":K,"ms":…} once every stream
 * has ACKed its first CLA; {"event":"error","detail":…} on a stream error.
 * It runs until killed or until stdin closes.
 *
 * stdin, lines, for bursts timed here (the server may be another process):
 *   `mark` → {"event":"marked"}: from now on, count each stream's responses and
 *     the time of its last one;
 *   `settle QUIET_MS TIMEOUT_MS` → {"event":"settled","lastMs":[…],"counts":[…]}
 *     once every stream has had a response since the mark and none has arrived
 *     for QUIET_MS (or TIMEOUT_MS passed: "timedOut":true).
 */
import * as grpc from '@grpc/grpc-js';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import { utf8Bytes, WireWriter, fieldSize, optionalFieldSize } from '../server/src/wire/wire.js';
import { ENDPOINT_TYPE } from '../server/src/resources/type-urls.js';
import { makeClients } from './data.js';

const ADS_PATH = '/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources';

const { values } = parseArgs({
  options: {
    target: { type: 'string' },
    streams: { type: 'string', default: '100' },
    localities: { type: 'string', default: '100' },
    service: { type: 'string', default: 'svc' },
  },
});
const target = values.target ?? '';
const streams = Number(values.streams);
if (!target || !Number.isInteger(streams) || streams < 1) {
  process.stderr.write('usage: fanout-clients --target HOST:PORT --streams K [--localities L] [--service NAME]\n');
  process.exit(2);
}

/** A DiscoveryRequest, hand-encoded: node only on the first request of a stream. */
function request(opts: {
  version: string;
  nonce: string;
  node?: { id: string; region: string; zone: string; subzone: string };
}): Buffer {
  const version = utf8Bytes(opts.version);
  const nonce = utf8Bytes(opts.nonce);
  const type = utf8Bytes(ENDPOINT_TYPE);
  const name = utf8Bytes(values.service ?? 'svc');
  let node: Uint8Array | undefined;
  if (opts.node) {
    const id = utf8Bytes(opts.node.id);
    const [r, z, s] = [opts.node.region, opts.node.zone, opts.node.subzone].map(utf8Bytes) as [
      Uint8Array,
      Uint8Array,
      Uint8Array,
    ];
    const loc = optionalFieldSize(1, r.length) + optionalFieldSize(2, z.length) + optionalFieldSize(3, s.length);
    node = new WireWriter(fieldSize(1, id.length) + fieldSize(4, loc))
      .bytes(1, id)
      .open(4, loc)
      .optionalBytes(1, r)
      .optionalBytes(2, z)
      .optionalBytes(3, s)
      .finish();
  }
  const size =
    optionalFieldSize(1, version.length) +
    (node ? fieldSize(2, node.length) : 0) +
    fieldSize(3, name.length) +
    fieldSize(4, type.length) +
    optionalFieldSize(5, nonce.length);
  const w = new WireWriter(size).optionalBytes(1, version);
  if (node) w.bytes(2, node);
  const out = w.bytes(3, name).bytes(4, type).optionalBytes(5, nonce).finish();
  return Buffer.from(out.buffer, out.byteOffset, out.byteLength);
}

/** version_info and nonce of a DiscoveryResponse, skipping its resources. */
function envelope(buf: Buffer): { version: string; nonce: string } {
  let pos = 0;
  let version = '';
  let nonce = '';
  const varint = (): number => {
    let n = 0;
    let mul = 1;
    for (;;) {
      const b = buf[pos++] as number;
      n += (b & 0x7f) * mul;
      if (b < 0x80) return n;
      mul *= 128;
    }
  };
  while (pos < buf.length) {
    const tag = varint();
    const field = Math.floor(tag / 8);
    const wire = tag & 7;
    if (wire === 0) {
      varint();
    } else if (wire === 2) {
      const len = varint();
      if (field === 1) version = buf.toString('utf8', pos, pos + len);
      else if (field === 5) nonce = buf.toString('utf8', pos, pos + len);
      pos += len;
    } else if (wire === 5) pos += 4;
    else if (wire === 1) pos += 8;
    else throw new Error(`unexpected wire type ${wire}`);
  }
  return { version, nonce };
}

const started = Date.now();
/** Responses per stream since the last `mark`, and when each stream's last one arrived (ms after the mark). */
const burst = { t0: 0, lastAny: 0, counts: [] as number[], last: [] as number[] };
const placements = makeClients(streams, Number(values.localities));
let acked = 0;
let ready = false;
const clients: grpc.Client[] = [];

function say(obj: object): void {
  process.stdout.write(`${JSON.stringify(obj)}\n`);
}

/** Whether stream i has ACKed its first CLA (a reopened stream is counted once). */
const counted: boolean[] = [];
/** Reopens per stream after a connection error (a loaded machine resets a few connects). */
const MAX_REOPENS = 5;

function open(i: number, reopens = 0): void {
  // A local subchannel pool: every client its own connection, as separate workloads would have.
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
  call.on('data', (buf: Buffer) => {
    const { version, nonce } = envelope(buf);
    call.write(request({ version, nonce }));
    burst.counts[i] = (burst.counts[i] ?? 0) + 1;
    burst.last[i] = performance.now() - burst.t0;
    burst.lastAny = performance.now();
    if (!counted[i]) {
      counted[i] = true;
      if (++acked === streams && !ready) {
        ready = true;
        say({ event: 'ready', streams, ms: Date.now() - started });
      }
    }
  });
  call.on('error', (err: Error) => {
    say({ event: 'error', stream: i, detail: err.message });
    if (reopens < MAX_REOPENS && !stopping) {
      client.close();
      setTimeout(() => open(i, reopens + 1), 200);
    }
  });
  const p = placements[i]!;
  call.write(
    request({
      version: '',
      nonce: '',
      node: { id: `bench-${i}`, region: p.locality.region, zone: p.locality.zone, subzone: p.locality.subzone },
    }),
  );
}

// Open in batches, so the server's accept queue and this process's event loop keep up.
let next = 0;
function openBatch(): void {
  const end = Math.min(streams, next + 250);
  for (; next < end; next++) open(next);
  if (next < streams) setTimeout(openBatch, 5);
}
openBatch();

let stopping = false;
function shutdown(): void {
  stopping = true;
  for (const c of clients) c.close();
  process.exit(0);
}
function settle(quietMs: number, timeoutMs: number): void {
  const deadline = performance.now() + timeoutMs;
  const check = (): void => {
    const now = performance.now();
    let all = true;
    for (let i = 0; i < streams && all; i++) all = (burst.counts[i] ?? 0) > 0;
    if ((all && now - burst.lastAny >= quietMs) || now > deadline) {
      const counts = Array.from({ length: streams }, (_, i) => burst.counts[i] ?? 0);
      const lastMs = Array.from({ length: streams }, (_, i) => Math.round((burst.last[i] ?? NaN) * 10) / 10);
      say({ event: 'settled', counts, lastMs, timedOut: !all });
    } else setTimeout(check, 20);
  };
  check();
}

createInterface({ input: process.stdin }).on('line', (line) => {
  const [cmd, a, b] = line.trim().split(/\s+/);
  if (cmd === 'mark') {
    burst.t0 = performance.now();
    burst.lastAny = burst.t0;
    burst.counts = [];
    burst.last = [];
    say({ event: 'marked' });
  } else if (cmd === 'settle') settle(Number(a), Number(b));
});
process.stdin.on('end', shutdown);
process.on('SIGTERM', shutdown);
