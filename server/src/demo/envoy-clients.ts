/**
 * The demo's Envoy part: a sidecar in two of the demo's client localities, and a plain gRPC client
 * calling Echo through each sidecar's outbound listener, with the same report as the proxyless clients.
 */
import * as grpc from '@grpc/grpc-js';
import { formatLocality, parseLocality, type Locality } from '../domain/locality.js';
import { echoService, type WhoReply } from './echo-proto.js';
import { findEnvoyBinary, startSidecar, type Sidecar } from './envoy-sidecars.js';
import type { Tally } from './xds-client.js';

const SIDECARS = [
  { at: 'us-east/us-east-1a/rack1', outbound: '127.0.0.21' },
  { at: 'eu-west/eu-west-1b/rack7', outbound: '127.0.0.22' },
];

export interface EnvoyClients {
  report(title: string, n: number, localityOf: ReadonlyMap<string, Locality>): Promise<void>;
  /** Waits until requests through sidecar `i` satisfy `ok` (15 s at most). */
  waitUntil(i: number, ok: (t: Tally) => boolean): Promise<void>;
  stop(): Promise<void>;
}

async function tally(client: grpc.Client, n: number): Promise<Tally> {
  const byBackend = new Map<string, number>();
  let failures = 0;
  let lastError: string | undefined;
  const who = (client as unknown as Record<string, (...a: unknown[]) => void>)['Who']!.bind(client);
  await Promise.all(
    Array.from(
      { length: n },
      () =>
        new Promise<void>((resolve) =>
          who({ caller: 'demo' }, { deadline: Date.now() + 2000 }, (err: grpc.ServiceError | null, r?: WhoReply) => {
            if (err || !r) {
              failures++;
              lastError = err?.message;
            } else byBackend.set(r.backend_id, (byBackend.get(r.backend_id) ?? 0) + 1);
            resolve();
          }),
        ),
    ),
  );
  return { byBackend, failures, ...(lastError !== undefined ? { lastError } : {}) };
}

export async function startEnvoySidecars(
  xds: string,
  port: number,
  log: (line: string) => void,
): Promise<EnvoyClients> {
  const { bin, reason } = findEnvoyBinary();
  if (!bin) throw new Error(`canopy demo --envoy: ${reason}`);
  const sidecars: Sidecar[] = [];
  const clients: grpc.Client[] = [];
  const stop = async () => {
    for (const c of clients) c.close();
    await Promise.all(sidecars.map((s) => s.stop()));
  };
  try {
    for (const s of SIDECARS) {
      const sidecar = await startSidecar({
        bin,
        nodeId: `demo-envoy-${s.at}`,
        locality: parseLocality(s.at),
        xds,
        outboundAddress: s.outbound,
      });
      sidecars.push(sidecar);
      clients.push(new (echoService())(`${s.outbound}:${port}`, grpc.credentials.createInsecure()));
      log(`  Envoy sidecar in ${s.at}: listener ${s.outbound}:${port}, admin ${sidecar.adminUrl}`);
    }
  } catch (err) {
    await stop();
    throw err;
  }
  const waitUntil = async (i: number, ok: (t: Tally) => boolean) => {
    const deadline = Date.now() + 15_000;
    for (;;) {
      if (ok(await tally(clients[i]!, 20))) return;
      if (Date.now() > deadline) throw new Error(`requests through ${sidecars[i]?.nodeId} never settled`);
      await new Promise((r) => setTimeout(r, 200));
    }
  };
  for (let i = 0; i < clients.length; i++) await waitUntil(i, (t) => t.failures === 0 && t.byBackend.size > 0);
  return {
    waitUntil,
    stop,
    async report(title, n, localityOf) {
      log(`\n${title} (${n} requests through each):`);
      for (const [i, c] of clients.entries()) {
        const t = await tally(c, n);
        const parts = [...t.byBackend]
          .sort((a, b) => b[1] - a[1])
          .map(([id, k]) => `${id} (${formatLocality(localityOf.get(id) ?? parseLocality(''))}) x${k}`);
        if (t.failures) parts.push(`${t.failures} failed`);
        log(`  Envoy in ${(SIDECARS[i]?.at ?? '').padEnd(26)} -> ${parts.join(', ')}`);
      }
    },
  };
}
