/**
 * The bare grpc-js baseline of the server macro run, as its own process: the
 * same ADS method on grpc-js, whose response serializer is the identity (as
 * Canopy's is), writing the same CLA bytes Canopy would send. Every client
 * locality the bench's clients use (`--localities L`: makeClients' first L)
 * is looked up in one CLA cache and each distinct CLA encoded once, before
 * the server says it is ready: the timed window holds only map lookups and
 * writes. It does no xDS bookkeeping at all: what it costs is the floor of
 * writing and ACKing those bytes here.
 *
 *   node dist/bench/bare-server.js --config FILE --service NAME --localities L
 *
 * stdout, JSON lines: {"event":"ready","address":…}. stdin, lines:
 *   `prepare START COUNT` flips the health of endpoints START… of the service
 *     (as the macro run's admin PATCHes do to Canopy) and pre-encodes every
 *     locality's next response → {"event":"prepared"};
 *   `write N` writes each stream its prepared response N times → {"event":"written"}.
 */
import * as grpc from '@grpc/grpc-js';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import type { Locality } from '../server/src/domain/locality.js';
import { Mesh, type ServiceState } from '../server/src/domain/mesh.js';
import type { Endpoint } from '../server/src/domain/service.js';
import { serverClaCache } from '../server/src/resources/endpoint/endpoint.js';
import { makeResource } from '../server/src/resources/resource.js';
import { ENDPOINT_TYPE } from '../server/src/resources/type-urls.js';
import { loadConfigFile } from '../server/src/config/config-file.js';
import { encodeDiscoveryResponse } from '../server/src/wire/envelope.js';
import type { DiscoveryRequest } from '../server/src/wire/request.js';
import { bareAdsServer, serveHeapGrowth } from './bare-ads.js';
import { makeClients } from './data.js';

serveHeapGrowth();
const { values } = parseArgs({
  options: {
    config: { type: 'string' },
    service: { type: 'string', default: 'svc' },
    localities: { type: 'string', default: '100' },
  },
});
const service = values.service ?? 'svc';
const localities = makeClients(Number(values.localities), Number(values.localities)).map((c) => c.locality);

const loaded = await loadConfigFile(values.config ?? '');
if (!loaded.ok) throw new Error(`bare server: bad config: ${JSON.stringify(loaded.errors)}`);
const mesh = new Mesh();
for (const s of loaded.value.services) mesh.put(s);
const state = (): ServiceState => mesh.get(service) as ServiceState;

const keyOf = (l: Locality): string => `${l.region}/${l.zone}/${l.subzone}`;
let version = 0;
let encoded = new Map<string, Buffer>();
/** Late encodes (a locality not pre-encoded): should stay 0, reported on stderr. */
let late = 0;
/** Distinct responses at the current version: what a push that encodes each once encodes. */
let distinct = 0;

/** Every locality's response at the current version: one cache, each distinct CLA encoded once. */
function preEncode(): void {
  const cache = serverClaCache();
  const byEntry = new Map<unknown, Buffer>();
  encoded = new Map();
  for (const l of localities) {
    const entry = cache.lookup(state(), { locality: l, network: '', node: '', cluster: '', labels: {} });
    let b = byEntry.get(entry);
    if (!b) {
      const any = makeResource(service, ENDPOINT_TYPE, entry.bytes).any;
      b = encodeDiscoveryResponse({
        versionInfo: `v${version}`,
        typeUrl: ENDPOINT_TYPE,
        nonce: `n${version}`,
        resources: [any],
      });
      byEntry.set(entry, b);
    }
    encoded.set(keyOf(l), b);
  }
  distinct = byEntry.size;
}

function bytesFor(l: Locality): Buffer {
  const b = encoded.get(keyOf(l));
  if (b) return b;
  late++;
  process.stderr.write(`bare server: locality ${keyOf(l)} was not pre-encoded (${late} so far)\n`);
  const entry = serverClaCache().lookup(state(), { locality: l, network: '', node: '', cluster: '', labels: {} });
  const any = makeResource(service, ENDPOINT_TYPE, entry.bytes).any;
  const out = encodeDiscoveryResponse({
    versionInfo: `v${version}`,
    typeUrl: ENDPOINT_TYPE,
    nonce: `n${version}`,
    resources: [any],
  });
  encoded.set(keyOf(l), out);
  return out;
}
preEncode();

interface Stream {
  readonly call: grpc.ServerDuplexStream<DiscoveryRequest, Buffer>;
  readonly locality: Locality;
}
const streams: Stream[] = [];
const server = bareAdsServer((call) => {
  call.on('data', (req: DiscoveryRequest) => {
    if (!req.node) return; // an ACK: nothing to do
    const locality = req.node.locality ?? { region: '', zone: '', subzone: '' };
    streams.push({ call, locality });
    call.write(bytesFor(locality));
  });
  call.on('error', () => {});
});
const port = await new Promise<number>((resolve, reject) =>
  server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) =>
    err ? reject(err) : resolve(p),
  ),
);
const say = (o: object): void => void process.stdout.write(`${JSON.stringify(o)}\n`);
say({ event: 'ready', address: `127.0.0.1:${port}`, distinct });

let prepared: Buffer[] = [];
createInterface({ input: process.stdin }).on('line', (line) => {
  const [cmd, a, b] = line.trim().split(/\s+/);
  if (cmd === 'prepare') {
    const endpoints = [...state().endpoints.values()];
    const start = Number(a);
    const flips: Endpoint[] = [];
    for (let i = start; i < start + Number(b); i++) {
      const e = endpoints[i % endpoints.length] as Endpoint;
      flips.push({ ...e, health: e.health === 'healthy' ? 'unhealthy' : 'healthy' });
    }
    mesh.patch(service, flips);
    version++;
    preEncode();
    prepared = streams.map((s) => bytesFor(s.locality));
    say({ event: 'prepared', distinct });
  } else if (cmd === 'write') {
    for (let n = 0; n < Number(a); n++) streams.forEach((s, i) => s.call.write(prepared[i] as Buffer));
    say({ event: 'written' });
  }
});
process.stdin.on('end', () => {
  server.forceShutdown();
  process.exit(0);
});
