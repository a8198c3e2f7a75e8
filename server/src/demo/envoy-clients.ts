/**
 * The demo's Envoy part: a sidecar in two of the demo's client localities, bootstrapped with every Canopy
 * replica, and a plain gRPC client calling Echo through each sidecar's outbound listener, with the same
 * report as the proxyless clients.
 */
import type { ChildProcess } from 'node:child_process';
import * as grpc from '@grpc/grpc-js';
import { CodedError } from '../domain/errors.js';
import { formatLocality, parseLocality, type Locality } from '../domain/locality.js';
import { echoService, type WhoReply } from './echo-proto.js';
import { findEnvoyBinary, startSidecar, type Sidecar } from './envoy-sidecars.js';
import type { Tally } from './xds-client.js';

export const SIDECARS = [
  { at: 'us-east/us-east-1a/rack1', outbound: '127.0.0.21' },
  { at: 'eu-west/eu-west-1b/rack7', outbound: '127.0.0.22' },
];

export interface EnvoyClients {
  readonly sidecars: readonly Sidecar[];
  report(title: string, n: number, localityOf: ReadonlyMap<string, Locality>): Promise<Tally[]>;
  /** Waits until requests through sidecar `i` satisfy `ok` (15 s at most). */
  waitUntil(i: number, ok: (t: Tally) => boolean): Promise<void>;
  /** Requests through every sidecar, 10 at a time each, until stopped (60 s at most): what each got. */
  steady(): { stop(): Promise<Tally[]> };
  /** Whether sidecar `i` has its ADS stream up (Envoy's control_plane.connected_state). */
  connected(i: number): Promise<boolean>;
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

function add(into: Tally, t: Tally): Tally {
  const byBackend = new Map(into.byBackend);
  for (const [id, n] of t.byBackend) byBackend.set(id, (byBackend.get(id) ?? 0) + n);
  const lastError = t.lastError ?? into.lastError;
  return { byBackend, failures: into.failures + t.failures, ...(lastError !== undefined ? { lastError } : {}) };
}

/** "127.0.0.11 (us-east/us-east-1a/rack1) x60, 2 failed" */
export function describeTally(t: Tally, localityOf: ReadonlyMap<string, Locality>): string {
  const parts = [...t.byBackend]
    .sort((a, b) => b[1] - a[1])
    .map(([id, k]) => `${id} (${formatLocality(localityOf.get(id) ?? parseLocality(''))}) x${k}`);
  if (t.failures) parts.push(`${t.failures} failed`);
  return parts.join(', ');
}

async function startAll(
  bin: string,
  xds: string,
  port: number,
  log: (line: string) => void,
  onSpawn: (child: ChildProcess) => void,
) {
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
        onSpawn,
      });
      sidecars.push(sidecar);
      clients.push(new (echoService())(`${s.outbound}:${port}`, grpc.credentials.createInsecure()));
      log(`  Envoy sidecar in ${s.at}: listener ${s.outbound}:${port}, admin ${sidecar.adminUrl}`);
    }
  } catch (err) {
    await stop();
    throw err;
  }
  return { sidecars, clients, stop };
}

/** `xds`: every replica, comma-separated (the bootstrap lists them all). */
export async function startEnvoySidecars(
  xds: string,
  port: number,
  log: (line: string) => void,
  onSpawn: (child: ChildProcess) => void = () => {},
): Promise<EnvoyClients> {
  const { bin, reason } = findEnvoyBinary();
  if (!bin) throw new CodedError('CANOPY_BAD_OPTION', `canopy demo --envoy: ${reason}`);
  const { sidecars, clients, stop } = await startAll(bin, xds, port, log, onSpawn);
  const waitUntil = async (i: number, ok: (t: Tally) => boolean) => {
    const deadline = Date.now() + 15_000;
    for (;;) {
      if (ok(await tally(clients[i]!, 20))) return;
      if (Date.now() > deadline)
        throw new CodedError('CANOPY_PEER_FAILED', `requests through ${sidecars[i]?.nodeId} never settled`);
      await new Promise((r) => setTimeout(r, 200));
    }
  };
  for (let i = 0; i < clients.length; i++) await waitUntil(i, (t) => t.failures === 0 && t.byBackend.size > 0);
  const steady = () => {
    let stopped = false;
    const deadline = Date.now() + 60_000;
    const loops = clients.map(async (c) => {
      let sum: Tally = { byBackend: new Map(), failures: 0 };
      while (!stopped && Date.now() < deadline) sum = add(sum, await tally(c, 10));
      return sum;
    });
    return {
      stop: () => {
        stopped = true;
        return Promise.all(loops);
      },
    };
  };
  const connected = async (i: number) => {
    const url = `${sidecars[i]!.adminUrl}/stats?filter=^control_plane.connected_state$`;
    const text = await fetch(url).then(
      (r) => r.text(),
      () => '',
    );
    return /control_plane\.connected_state: 1/.test(text);
  };
  return {
    sidecars,
    waitUntil,
    steady,
    connected,
    stop,
    async report(title, n, localityOf) {
      log(`\n${title} (${n} requests through each):`);
      const out: Tally[] = [];
      for (const [i, c] of clients.entries()) {
        const t = await tally(c, n);
        out.push(t);
        log(`  Envoy in ${(SIDECARS[i]?.at ?? '').padEnd(26)} -> ${describeTally(t, localityOf)}`);
      }
      return out;
    },
  };
}
