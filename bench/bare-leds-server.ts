/**
 * The bare grpc-js baseline of the server macro run's LEDS rows, as its own
 * process: DeltaAggregatedResources on grpc-js (identity response
 * serializer, as Canopy's), replaying responses recorded from Canopy
 * (response-record.ts) byte for byte: to a stream's first EDS request, the
 * CLA its locality was sent; to its LEDS subscription, the members it was
 * sent; on `write B`, what its locality was sent in recorded burst B. No xDS
 * bookkeeping: the floor of writing and ACKing those bytes here.
 *
 *   node dist/bench/bare-leds-server.js --record FILE
 *
 * stdout, JSON lines: {"event":"ready","address":…}. stdin, lines:
 *   `prepare` → {"event":"prepared"} (nothing to prepare: the bytes are recorded);
 *   `write B` writes each stream its responses of burst B → {"event":"written"}.
 * A stream's recorded counterpart is its node id's number (`bench-N`) modulo
 * the recorded streams, which the bench records one per client locality.
 */
import * as grpc from '@grpc/grpc-js';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import { ENDPOINT_TYPE } from '../server/src/resources/type-urls.js';
import type { DeltaDiscoveryRequest } from '../server/src/wire/request.js';
import { bareDeltaAdsServer, serveHeapGrowth } from './bare-ads.js';
import { LEDS_TYPE } from './leds-stream.js';
import { ResponseRecord } from './response-record.js';

serveHeapGrowth();
const { values } = parseArgs({ options: { record: { type: 'string' } } });
const record = new ResponseRecord(values.record ?? '');

interface Stream {
  readonly call: grpc.ServerDuplexStream<DeltaDiscoveryRequest, Buffer>;
  readonly index: number;
}
const streams: Stream[] = [];
const server = bareDeltaAdsServer((call) => {
  let index = -1;
  call.on('data', (req: DeltaDiscoveryRequest) => {
    if (req.node) {
      index = Number(/(\d+)$/.exec(req.node.id)?.[1] ?? 0);
      streams.push({ call, index });
    }
    // ACKs carry no subscription: nothing to do.
    if (req.subscribe.length === 0 || index < 0) return;
    if (req.typeUrl === ENDPOINT_TYPE || req.typeUrl === LEDS_TYPE) {
      for (const b of record.initial(index, req.typeUrl)) call.write(b);
    }
  });
  call.on('error', () => {});
});
const port = await new Promise<number>((resolve, reject) =>
  server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) =>
    err ? reject(err) : resolve(p),
  ),
);
const say = (o: object): void => void process.stdout.write(`${JSON.stringify(o)}\n`);
say({ event: 'ready', address: `127.0.0.1:${port}`, recordedStreams: record.streams, bursts: record.burstCount });

createInterface({ input: process.stdin }).on('line', (line) => {
  const [cmd, a] = line.trim().split(/\s+/);
  if (cmd === 'prepare') say({ event: 'prepared' });
  else if (cmd === 'write') {
    const burst = Number(a);
    for (const s of streams) for (const b of record.burst(burst, s.index)) s.call.write(b);
    say({ event: 'written' });
  }
});
process.stdin.on('end', () => {
  server.forceShutdown();
  process.exit(0);
});
