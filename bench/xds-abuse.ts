/**
 * What a misbehaving ADS client costs the server, measured on a real `canopy
 * serve` process over loopback (the client runs in this process):
 *
 * - junk: one stream sends 20,000 requests, each with a different unknown type URL;
 * - stalled: one SotW stream subscribes to a large CLA, never reads, and changes
 *   its subscription 500 times.
 *
 * Reports the server's RSS and V8 heap + external (Buffer) growth (from its /metrics), the responses
 * it wrote, and the size of /debug/clients. Run: `npm run build && node dist/bench/xds-abuse.js [runs]`.
 */
import { startCanopyProcess, type CanopyProcess } from '../e2e/support/canopy-process.js';
import { RawAdsStream } from '../e2e/support/raw-ads.js';

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

async function sample(canopy: CanopyProcess): Promise<Sample> {
  const text = String((await canopy.admin('GET', '/metrics')).body);
  const one = (name: string): number => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);
  let responses = 0;
  for (const m of text.matchAll(/^canopy_xds_responses_total\{[^}]*\} (\S+)$/gm)) responses += Number(m[1]);
  return {
    rss: one('process_resident_memory_bytes'),
    heap: one('nodejs_heap_size_used_bytes') + one('nodejs_external_memory_bytes'),
    responses,
  };
}

async function debugClientsBytes(canopy: CanopyProcess): Promise<number> {
  const res = await fetch(`${canopy.adminUrl}/debug/clients`);
  return (await res.text()).length;
}

const MiB = 1024 * 1024;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function junk(): Promise<Record<string, number>> {
  const canopy = await startCanopyProcess({ services: [{ ...bigService(), name: 'small', endpoints: bigService().endpoints.slice(0, 3) }] });
  try {
    const before = await sample(canopy);
    const ads = new RawAdsStream(canopy.xdsUri);
    ads.send({ node, type_url: 'type.example/junk.0', resource_names: ['x'] });
    for (let i = 1; i < JUNK_REQUESTS; i++) await ads.sendAndFlush({ type_url: `type.example/junk.${i}`, resource_names: ['x'] });
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
    await canopy.stop();
  }
}

async function stalled(): Promise<Record<string, number>> {
  const canopy = await startCanopyProcess({ services: [bigService()] });
  try {
    const before = await sample(canopy);
    const ads = new RawAdsStream(canopy.xdsUri, {}, true);
    let sent = 0;
    const first = { node, type_url: EDS, resource_names: ['big'] };
    sent += JSON.stringify(first).length;
    ads.send(first);
    for (let i = 0; i < STALLED_CHANGES; i++) {
      // Dropping 'big' and asking for it again makes each second request call for the whole CLA.
      const req = { type_url: EDS, resource_names: i % 2 ? ['big'] : [`x${i}`] };
      sent += JSON.stringify(req).length;
      await ads.sendAndFlush(req);
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
    await canopy.stop();
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
    summary[key] = `${median(xs).toPrecision(2)} (${Math.min(...xs).toPrecision(2)}..${Math.max(...xs).toPrecision(2)})`;
  }
  console.log(JSON.stringify({ scenario: name, runs, ...summary }));
}
process.exit(0);
