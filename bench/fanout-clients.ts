/**
 * The far side of the fan-out benchmark, in its own process: K ADS streams,
 * each on its own grpc-js channel and TCP connection (as K real clients would
 * be), each subscribed to one service's ClusterLoadAssignment from its own
 * locality, ACKing every response as soon as it arrives.
 *
 *   node dist/bench/fanout-clients.js --target 127.0.0.1:PORT --streams K --localities L --service NAME
 *        [--mode sotw|leds] [--record FILE]
 *
 * --mode sotw (the default): StreamAggregatedResources, one CLA per stream.
 * --mode leds: Envoy on DeltaAggregatedResources (node user_agent_name
 *   "envoy"): the CLA, then the LEDS collections it names (leds-stream.ts).
 * --record FILE: keeps every response (identical ones once), per stream and
 *   per burst, and saves them on `save` (response-record.ts), for the bare
 *   server to replay.
 *
 * stdout, JSON lines: {"event":"ready","streams":K,"ms":…} once every stream
 * has its first CLA (and, with LEDS, its first members), ACKed;
 * {"event":"error","detail":…} on a stream error. It runs until killed or
 * until stdin closes.
 *
 * stdin, lines, for bursts timed here (the server may be another process):
 *   `mark` → {"event":"marked"}: from now on, count each stream's responses and
 *     the time of its last one;
 *   `settle QUIET_MS TIMEOUT_MS` → {"event":"settled","lastMs":[…],"counts":[…],"bytes":[…]}
 *     once every stream has had a response since the mark and none has arrived
 *     for QUIET_MS (or TIMEOUT_MS passed: "timedOut":true);
 *   `save` (with --record) → {"event":"saved"}.
 */
import * as grpc from '@grpc/grpc-js';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import { utf8Bytes, WireWriter, fieldSize, optionalFieldSize } from '../server/src/wire/wire.js';
import { ENDPOINT_TYPE } from '../server/src/resources/type-urls.js';
import { makeClients } from './data.js';
import { DELTA_ADS_PATH } from './delta-wire.js';
import { runLedsStream } from './leds-stream.js';
import { ResponseRecorder } from './response-record.js';

const ADS_PATH = '/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources';

const { values } = parseArgs({
  options: {
    target: { type: 'string' },
    streams: { type: 'string', default: '100' },
    localities: { type: 'string', default: '100' },
    service: { type: 'string', default: 'svc' },
    mode: { type: 'string', default: 'sotw' },
    record: { type: 'string' },
  },
});
const leds = values.mode === 'leds';
const recorder = values.record ? new ResponseRecorder() : undefined;
const target = values.target ?? '';
const streams = Number(values.streams);
if (!target || !Number.isInteger(streams) || streams < 1 || (values.mode !== 'sotw' && !leds)) {
  process.stderr.write(
    'usage: fanout-clients --target HOST:PORT --streams K [--localities L] [--service NAME] [--mode sotw|leds] [--record FILE]\n',
  );
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
const burst = { t0: 0, lastAny: 0, counts: [] as number[], last: [] as number[], bytes: [] as number[] };
const placements = makeClients(streams, Number(values.localities));
let acked = 0;
/** Streams whose CLA named LEDS collections (--mode leds). */
let ledsStreams = 0;
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
    leds ? DELTA_ADS_PATH : ADS_PATH,
    (b: Buffer) => b,
    (b: Buffer) => b,
  );
  const received = (buf: Buffer, typeUrl: string): void => {
    burst.counts[i] = (burst.counts[i] ?? 0) + 1;
    burst.bytes[i] = (burst.bytes[i] ?? 0) + buf.length;
    burst.last[i] = performance.now() - burst.t0;
    burst.lastAny = performance.now();
    recorder?.add(i, typeUrl, buf);
  };
  const streamReady = (collections = 0): void => {
    if (counted[i]) return;
    counted[i] = true;
    if (collections > 0) ledsStreams++;
    if (++acked === streams && !ready) {
      ready = true;
      say({ event: 'ready', streams, ms: Date.now() - started, ledsStreams });
    }
  };
  call.on('error', (err: Error) => {
    say({ event: 'error', stream: i, detail: err.message });
    if (reopens < MAX_REOPENS && !stopping) {
      client.close();
      setTimeout(() => open(i, reopens + 1), 200);
    }
  });
  const p = placements[i]!;
  if (leds) {
    const { region, zone, subzone } = p.locality;
    runLedsStream(
      call,
      { id: `bench-${i}`, service: values.service ?? 'svc', region, zone, subzone },
      {
        response: received,
        ready: streamReady,
      },
    );
    return;
  }
  call.on('data', (buf: Buffer) => {
    const { version, nonce } = envelope(buf);
    call.write(request({ version, nonce }));
    received(buf, ENDPOINT_TYPE);
    streamReady(0);
  });
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
      const bytes = Array.from({ length: streams }, (_, i) => burst.bytes[i] ?? 0);
      say({ event: 'settled', counts, lastMs, bytes, timedOut: !all });
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
    burst.bytes = [];
    recorder?.mark();
    say({ event: 'marked' });
  } else if (cmd === 'settle') settle(Number(a), Number(b));
  else if (cmd === 'save' && recorder && values.record) {
    recorder.save(values.record);
    say({ event: 'saved' });
  }
});
process.stdin.on('end', shutdown);
process.on('SIGTERM', shutdown);
