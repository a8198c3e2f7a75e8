/**
 * What a misbehaving ADS client costs the server, measured on a real `canopy
 * serve` process over loopback (the client runs in this process):
 *
 * - junk: one stream sends 20,000 requests, each with a different unknown type URL;
 * - stalled: one SotW stream (plain HTTP/2, its stream paused: flow control stalls the
 *   server) subscribes to a large CLA and changes its subscription 500 times.
 *
 * Reports the growth of the server's RSS and of its V8 heap + external (Buffer) memory after a full GC
 * (bench/abuse-server.ts), the responses it wrote (its /metrics), and the size of /debug/clients. Run: `npm run build && node dist/bench/xds-abuse.js [runs]`.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { RawAdsStream } from '../e2e/support/raw-ads.js';
import { StalledAdsClient } from '../e2e/support/stalled-ads.js';

const EDS = 'type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment';
const JUNK_REQUESTS = 20_000;
const STALLED_CHANGES = 500;
const BIG_ENDPOINTS = 3_000;
const node = { id: 'abuse', cluster: 'bench', locality: { region: 'r1', zone: 'z1', sub_zone: 's1' } };

function bigService() {
  return {
    name: 'big',
    loadBalancing: { mode: 'failover' },
    endpoints: Array.from({ length: BIG_ENDPOINTS }, (_, i) => ({
      address: `127.${1 + (i >> 16)}.${(i >> 8) & 255}.${i & 255}`,
      port: 9000,
      locality: { region: `r${i % 3}`, zone: `z${i % 7}`, subzone: `s${i % 11}` },
    })),
  };
}

interface Sample {
  readonly rss: number;
  readonly heap: number;
  readonly responses: number;
}

interface Server {
  readonly xdsUri: string;
  readonly adminUrl: string;
  readonly child: ChildProcess;
}

const SERVER = fileURLToPath(new URL('./abuse-server.js', import.meta.url));

function nextMessage<T>(child: ChildProcess): Promise<T> {
  return new Promise((resolve) => child.once('message', (m) => resolve(m as T)));
}

async function startServer(config: object): Promise<Server> {
  const child = fork(SERVER, [], { execArgv: ['--expose-gc'], stdio: 'inherit' });
  child.send(config);
  const { xds, admin } = await nextMessage<{ xds: string; admin: string }>(child);
  return { xdsUri: xds, adminUrl: `http://${admin}`, child };
}

async function stopServer(server: Server): Promise<void> {
  const exited = new Promise((resolve) => server.child.once('exit', resolve));
  server.child.send('stop');
  await exited;
}

async function sample(server: Server): Promise<Sample> {
  const text = await (await fetch(`${server.adminUrl}/metrics`)).text();
  let responses = 0;
  for (const m of text.matchAll(/^canopy_xds_responses_total\{[^}]*\} (\S+)$/gm)) responses += Number(m[1]);
  server.child.send('measure');
  const mem = await nextMessage<{ rss: number; heapUsed: number; external: number }>(server.child);
  return { rss: mem.rss, heap: mem.heapUsed + mem.external, responses };
}

/** One well-behaved client first, so the CLA cache and the protocol code are warm before the baseline. */
async function warmUp(server: Server, service: string): Promise<void> {
  const ads = new RawAdsStream(server.xdsUri);
  ads.send({ node: { ...node, id: 'warm-up' }, type_url: EDS, resource_names: [service] });
  await ads.next(30_000);
  ads.close();
}

async function debugClientsBytes(server: Server): Promise<number> {
  const res = await fetch(`${server.adminUrl}/debug/clients`);
  return (await res.text()).length;
}

const MiB = 1024 * 1024;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function junk(): Promise<Record<string, number>> {
  const canopy = await startServer({
    services: [{ ...bigService(), name: 'small', endpoints: bigService().endpoints.slice(0, 3) }],
  });
  try {
    await warmUp(canopy, 'small');
    const before = await sample(canopy);
    const ads = new RawAdsStream(canopy.xdsUri);
    ads.send({ node, type_url: 'type.example/junk.0', resource_names: ['x'] });
    for (let i = 1; i < JUNK_REQUESTS; i++)
      await ads.sendAndFlush({ type_url: `type.example/junk.${i}`, resource_names: ['x'] });
    // Requests on a stream are handled in order: once EDS is answered, every junk request was.
    ads.send({ type_url: EDS, resource_names: ['small'] });
    for (;;) if ((await ads.next(60_000)).type_url === EDS) break;
    const after = await sample(canopy);
    const debugBytes = await debugClientsBytes(canopy);
    ads.close();
    return {
      rssMiB: (after.rss - before.rss) / MiB,
      heapAndExternalMiB: (after.heap - before.heap) / MiB,
      responses: after.responses - before.responses,
      debugClientsKiB: debugBytes / 1024,
    };
  } finally {
    await stopServer(canopy);
  }
}

async function stalled(): Promise<Record<string, number>> {
  const canopy = await startServer({ services: [bigService()] });
  try {
    await warmUp(canopy, 'big');
    const before = await sample(canopy);
    const ads = new StalledAdsClient(canopy.xdsUri);
    let sent = 0;
    const first = { node, type_url: EDS, resource_names: ['big'] };
    sent += JSON.stringify(first).length;
    await ads.send(first);
    for (let i = 0; i < STALLED_CHANGES; i++) {
      // Dropping 'big' and asking for it again makes each second request call for the whole CLA.
      const req = { type_url: EDS, resource_names: i % 2 ? ['big'] : [`x${i}`] };
      sent += JSON.stringify(req).length;
      await ads.send(req);
    }
    await sleep(2000);
    const after = await sample(canopy);
    ads.close();
    return {
      rssMiB: (after.rss - before.rss) / MiB,
      heapAndExternalMiB: (after.heap - before.heap) / MiB,
      responses: after.responses - before.responses,
      requestKiB: sent / 1024,
    };
  } finally {
    await stopServer(canopy);
  }
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

const runs = Number(process.argv[2] ?? 5);
for (const [name, scenario] of [
  ['junk', junk],
  ['stalled', stalled],
] as const) {
  const results: Record<string, number>[] = [];
  for (let i = 0; i < runs; i++) results.push(await scenario());
  const summary: Record<string, string> = {};
  for (const key of Object.keys(results[0] ?? {})) {
    const xs = results.map((r) => r[key]!);
    summary[key] =
      `${median(xs).toPrecision(2)} (${Math.min(...xs).toPrecision(2)}..${Math.max(...xs).toPrecision(2)})`;
  }
  console.log(JSON.stringify({ scenario: name, runs, ...summary }));
}
process.exit(0);
