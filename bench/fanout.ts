/**
 * Fan-out to real streams, and memory per connected client.
 *
 * Canopy runs in this process (the real server: store, cache, ADS pipeline,
 * grpc-js transport); K clients run in another process (fanout-clients.ts),
 * each on its own connection, ACKing every response. One endpoint's health
 * flips; the time from the change to each stream's ACK arriving back at the
 * server is one sample.
 *
 * The baseline, in the same run: a bare grpc-js server in this process that
 * writes the same bytes (the same CLAs, pre-encoded) to K streams of the same
 * client program. That is the physical limit of writing and ACKing those
 * bytes here; the ratio is Canopy's overhead on top of it.
 */
import * as grpc from '@grpc/grpc-js';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { pino } from 'pino';
import { Mesh, type ServiceState } from '../server/src/domain/mesh.js';
import type { Endpoint } from '../server/src/domain/service.js';
import { startCanopy } from '../server/src/main.js';
import { serverClaCache } from '../server/src/resources/endpoint/endpoint.js';
import { encodeDiscoveryResponse } from '../server/src/wire/envelope.js';
import type { DiscoveryRequest } from '../server/src/wire/request.js';
import { nullObserver } from '../server/src/sessions/observer.js';
import { makeResource } from '../server/src/resources/resource.js';
import { ENDPOINT_TYPE } from '../server/src/resources/type-urls.js';
import { bareAdsServer } from './bare-ads.js';
import { failoverService, makeEndpoints, median, percentile, round, settleHeap } from './data.js';

export interface Latency {
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
  readonly samples: number;
}

export interface FanoutFigures {
  readonly streams: number;
  readonly endpoints: number;
  readonly claBytes: number;
  readonly rounds: number;
  readonly connectMs: number;
  readonly canopy: Latency;
  readonly rawWrite: Latency;
  /** Median time of the synchronous part: from the change until all K responses are handed to grpc-js. */
  readonly canopyPushLoopMs: number;
  /** The same for the raw write: the loop of K call.write()s of pre-encoded bytes. */
  readonly rawWriteLoopMs: number;
  readonly ratioP99: number;
  readonly ratioMax: number;
  /**
   * Server memory per connected stream, idle baseline subtracted, and the bare
   * grpc-js server's heap per stream for comparison (its RSS is not comparable:
   * it runs after Canopy in the same process, whose freed pages RSS still counts).
   */
  readonly memory: {
    readonly rssPerStreamKB: number;
    readonly heapPerStreamKB: number;
    readonly bareGrpcHeapPerStreamKB: number;
  };
}

const SERVICE = 'svc';
const CLIENTS_JS = fileURLToPath(new URL('./fanout-clients.js', import.meta.url));

interface ClientProcess {
  readonly child: ChildProcess;
  readonly connectMs: number;
  stop(): Promise<void>;
}

async function startClients(target: string, streams: number, localities: number): Promise<ClientProcess> {
  const child = spawn(
    process.execPath,
    [
      CLIENTS_JS,
      '--target',
      target,
      '--streams',
      String(streams),
      '--localities',
      String(localities),
      '--service',
      SERVICE,
    ],
    { stdio: ['pipe', 'pipe', 'inherit'] },
  );
  const lines = createInterface({ input: child.stdout! });
  const connectMs = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${streams} client streams not ready within 120 s`)), 120_000);
    lines.on('line', (line) => {
      const msg = JSON.parse(line) as { event: string; ms?: number; detail?: string };
      if (msg.event === 'ready') {
        clearTimeout(timer);
        resolve(msg.ms ?? 0);
      } else if (msg.event === 'error') process.stderr.write(`fan-out client: ${msg.detail}\n`);
    });
    child.on('exit', (code) => reject(new Error(`fan-out clients exited with ${code}`)));
  });
  return {
    child,
    connectMs,
    async stop() {
      child.stdin?.end();
      if (child.exitCode === null) await once(child, 'exit');
    },
  };
}

function latency(samples: readonly number[]): Latency {
  return {
    p50Ms: round(median(samples), 1),
    p99Ms: round(percentile(samples, 99), 1),
    maxMs: round(Math.max(...samples), 1),
    samples: samples.length,
  };
}

/** Resolves once `count()` reaches `n`, polling the event loop lightly. */
async function until(count: () => number, n: number, what: string): Promise<void> {
  const deadline = Date.now() + 120_000;
  while (count() < n) {
    if (Date.now() > deadline) throw new Error(`${what}: ${count()} of ${n} within 120 s`);
    await new Promise((r) => setTimeout(r, 2));
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function memory(): { rss: number; heap: number } {
  settleHeap();
  const m = process.memoryUsage();
  return { rss: m.rss, heap: m.heapUsed };
}

export async function runFanout(opts: {
  readonly streams: number;
  readonly endpoints: number;
  readonly localities: number;
  readonly rounds: number;
}): Promise<FanoutFigures> {
  const endpoints = makeEndpoints(opts.endpoints, Math.min(100, opts.endpoints));
  const spec = failoverService(SERVICE, endpoints);

  // ---- Canopy
  let acks: number[] = [];
  let t0 = 0;
  const canopy = await startCanopy({
    config: { server: {}, services: [spec] },
    host: '127.0.0.1',
    xdsPort: 0,
    adminPort: 0,
    // No debounce: the figure is the push itself (the default 100 ms quiet period would add to every sample).
    debounceMs: 0,
    logger: pino({ level: 'silent' }),
    observer: {
      ...nullObserver,
      acked: (typeUrl) => {
        if (typeUrl === ENDPOINT_TYPE) acks.push(performance.now() - t0);
      },
    },
  });
  const state = canopy.mesh.get(SERVICE) as ServiceState;
  const flip = endpoints[1] as Endpoint;
  const canopyPhase = await phase(canopy.xdsAddress, opts, 'Canopy fan-out ACKs', async (r) => {
    acks = [];
    t0 = performance.now();
    // Through the store, as an admin PATCH goes (a memory store here: no disk in the figure).
    await canopy.store.patchEndpoints(SERVICE, [{ ...flip, health: r % 2 === 0 ? 'unhealthy' : 'healthy' }], []);
    // Push now rather than on the zero-delay timer, so the synchronous part is measured alone.
    canopy.ads.flush();
    return { loopMs: performance.now() - t0, acks };
  });
  const claBytes = flattenLength(state);
  await canopy.stop();

  // ---- Raw write of the same bytes
  const raw = await startRawServer(spec.endpoints);
  const rawPhase = await phase(raw.address, opts, 'raw-write ACKs', (r) => {
    const start = performance.now();
    const acked = raw.go(r);
    return { loopMs: performance.now() - start, acks: acked };
  });
  await raw.stop();

  const c = latency(canopyPhase.samples);
  const w = latency(rawPhase.samples);
  return {
    streams: opts.streams,
    endpoints: opts.endpoints,
    claBytes,
    rounds: opts.rounds,
    connectMs: canopyPhase.connectMs,
    canopy: c,
    rawWrite: w,
    canopyPushLoopMs: round(median(canopyPhase.loops), 1),
    rawWriteLoopMs: round(median(rawPhase.loops), 1),
    ratioP99: round(c.p99Ms / w.p99Ms, 2),
    ratioMax: round(c.maxMs / w.maxMs, 2),
    memory: {
      rssPerStreamKB: perStreamKB(canopyPhase.connected.rss - canopyPhase.idle.rss, opts.streams),
      heapPerStreamKB: perStreamKB(canopyPhase.connected.heap - canopyPhase.idle.heap, opts.streams),
      bareGrpcHeapPerStreamKB: perStreamKB(rawPhase.connected.heap - rawPhase.idle.heap, opts.streams),
    },
  };
}

function perStreamKB(bytes: number, streams: number): number {
  return round(bytes / streams / 1024, 1);
}

/**
 * One side of the comparison: connect K client streams to `target`, read the
 * server's memory before and after, then run the rounds, each collecting one
 * ACK time per stream.
 */
async function phase(
  target: string,
  opts: { readonly streams: number; readonly localities: number; readonly rounds: number },
  what: string,
  round: (r: number) => { loopMs: number; acks: number[] } | Promise<{ loopMs: number; acks: number[] }>,
) {
  await sleep(200);
  const idle = memory();
  const clients = await startClients(target, opts.streams, opts.localities);
  await sleep(500);
  const connected = memory();
  const samples: number[] = [];
  const loops: number[] = [];
  for (let r = 0; r < opts.rounds; r++) {
    const { loopMs, acks } = await round(r);
    loops.push(loopMs);
    await until(() => acks.length, opts.streams, what);
    samples.push(...acks);
    await sleep(100);
  }
  await clients.stop();
  return { samples, loops, idle, connected, connectMs: clients.connectMs };
}

function flattenLength(state: ServiceState): number {
  const cache = serverClaCache();
  return cache.lookup(state, {
    locality: { region: 'r0', zone: 'z0', subzone: 's0' },
    network: '',
    node: '',
    cluster: '',
    labels: {},
  }).bytes.length;
}

/**
 * The baseline server: the same ADS method on grpc-js, whose response
 * serializer is the identity as Canopy's is. Each stream gets its locality's
 * CLA, pre-encoded as a whole DiscoveryResponse; `go` writes the next version
 * to every stream and collects the ACK times.
 */
async function startRawServer(endpoints: readonly Endpoint[]) {
  // The two versions the rounds alternate between, as Canopy's rounds do: with endpoint 1 unhealthy, then healthy.
  const versions = [0, 1].map((v) => {
    const mesh = new Mesh();
    const flip = endpoints[1] as Endpoint;
    mesh.put(
      failoverService(
        SERVICE,
        endpoints.map((e, i) => (i === 1 ? { ...flip, health: v === 0 ? 'unhealthy' : 'healthy' } : e)),
      ),
    );
    return { state: mesh.get(SERVICE) as ServiceState, cache: serverClaCache(), encoded: new Map<string, Buffer>() };
  });
  const bytesFor = (v: number, req: DiscoveryRequest): Buffer => {
    const ver = versions[v % 2]!;
    const n = req.node;
    const entry = ver.cache.lookup(ver.state, {
      locality: n?.locality ?? { region: '', zone: '', subzone: '' },
      network: '',
      node: '',
      cluster: '',
      labels: {},
    });
    let b = ver.encoded.get(entry.key);
    if (!b) {
      const any = makeResource(SERVICE, ENDPOINT_TYPE, entry.bytes).any;
      b = encodeDiscoveryResponse({ versionInfo: `v${v}`, typeUrl: ENDPOINT_TYPE, nonce: `n${v}`, resources: [any] });
      ver.encoded.set(entry.key, b);
    }
    return b;
  };
  interface RawStream {
    readonly call: grpc.ServerDuplexStream<DiscoveryRequest, Buffer>;
    readonly node: DiscoveryRequest;
  }
  const calls: RawStream[] = [];
  let acked: number[] = [];
  let expectNonce = '';
  let t0 = 0;
  const server = bareAdsServer((call) => {
    call.on('data', (req: DiscoveryRequest) => {
      if (req.node) {
        calls.push({ call, node: req });
        // The first response: the version before round 0 (endpoint 1 healthy).
        call.write(bytesFor(1, req));
      } else if (req.responseNonce === expectNonce) acked.push(performance.now() - t0);
    });
    call.on('error', () => {});
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) =>
      err ? reject(err) : resolve(p),
    ),
  );
  // Pre-encode both versions for every stream's locality before any timing.
  const warm = (): void => {
    for (const s of calls) for (const v of [0, 1]) bytesFor(v, s.node);
  };
  return {
    address: `127.0.0.1:${port}`,
    go(round: number): number[] {
      warm();
      acked = [];
      const v = round % 2 === 0 ? 0 : 1;
      expectNonce = `n${v}`;
      t0 = performance.now();
      for (const s of calls) s.call.write(bytesFor(v, s.node));
      return acked;
    },
    stop: () =>
      new Promise<void>((resolve) => {
        for (const s of calls) s.call.end();
        server.tryShutdown(() => resolve());
        setTimeout(() => {
          server.forceShutdown();
          resolve();
        }, 2000);
      }),
  };
}
