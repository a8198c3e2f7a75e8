/**
 * The two sides of the server macro run (server.ts): `canopy serve` driven
 * through its admin API, and a bare server child driven by line commands,
 * each behind one `Side`; and the size of the CLA both send.
 */
import type { Bytes } from '../server/src/wire/rope.js';
import { mkdtempSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Mesh, type ServiceState } from '../server/src/domain/mesh.js';
import { endpointKey, type Endpoint } from '../server/src/domain/service.js';
import { serverClaCache } from '../server/src/resources/endpoint/endpoint.js';
import { failoverService } from './data.js';
import { start, type Child } from './server-procs.js';

const CLI = fileURLToPath(new URL('../server/src/cli/canopy.js', import.meta.url));
/** The one service of the run's config. */
export const SERVICE = 'svc';

export interface Side {
  readonly server: Child;
  readonly target: string;
  /** Makes `changes` changes from endpoint `first`; the bare sides write burst `burst`, `writes` times (SotW). */
  change(first: number, changes: number, burst: number, writes: number): Promise<void>;
  /** Run before the mark: anything the side prepares untimed. */
  prepare(first: number, changes: number): Promise<void>;
  /** Responses encoded to be shared so far (Canopy's `canopy_xds_shared_encodes_total`), where the side counts them. */
  encodes?(): Promise<number>;
  /** Distinct responses at the side's current state (what the bare writer pre-encoded), where it knows them. */
  distinct?(): number;
}

export function claBytesOf(endpoints: readonly Endpoint[]): number {
  return claOf(SERVICE, endpoints).length;
}

/** The CLA Canopy's cache encodes for a client in r0/z0/s0 of `name`, a failover service of these endpoints. */
export function claOf(name: string, endpoints: readonly Endpoint[]): Bytes {
  const mesh = new Mesh();
  mesh.put(failoverService(name, endpoints));
  const client = {
    locality: { region: 'r0', zone: 'z0', subzone: 's0' },
    network: '',
    node: '',
    cluster: '',
    labels: {},
  };
  return serverClaCache().lookup(mesh.get(name) as ServiceState, client).bytes;
}

/**
 * `canopy serve` on the config file, with its change hook: health flips through the admin API. Each
 * process gets an empty data directory: flips persist in the embedded store, and one left over from
 * an earlier run would make the bench's first flip a no-op.
 */
export async function withCanopy<T>(
  file: string,
  endpoints: readonly Endpoint[],
  run: (side: Side) => Promise<T>,
  env?: Readonly<Record<string, string>>,
): Promise<T> {
  const flip = flipper(endpoints);
  const dataDir = mkdtempSync(path.join(path.dirname(file), 'canopy-data-'));
  const canopy = start([CLI, 'serve', '--config', file, '--data-dir', dataDir, '--log-level', 'info'], 'canopy', env);
  try {
    const ready = await canopy.next('canopy ready');
    const admin = `http://${String(ready['admin'])}`;
    return await run({
      server: canopy,
      target: String(ready['xds']),
      prepare: async () => {},
      encodes: async () => {
        const text = await fetch(`${admin}/metrics`).then((r) => r.text());
        const n = /^canopy_xds_shared_encodes_total (\d+)$/m.exec(text)?.[1];
        if (n === undefined) throw new Error('canopy_xds_shared_encodes_total is not in /metrics');
        return Number(n);
      },
      change: async (first, changes) => {
        const responses = await Promise.all(
          flip(first, changes).map((f) =>
            fetch(`${admin}/api/v1/services/${SERVICE}/endpoints/${encodeURIComponent(f.key)}`, {
              method: 'PATCH',
              headers: { 'content-type': 'application/json' },
              body: JSON.stringify({ health: f.healthy ? 'healthy' : 'unhealthy' }),
            }),
          ),
        );
        const bad = responses.find((r) => !r.ok);
        if (bad) throw new Error(`admin PATCH: ${bad.status} ${await bad.text()}`);
      },
    });
  } finally {
    await canopy.stop();
  }
}

/** Runs `run` against a bare server child started with `args`, its bursts driven by line commands. */
export async function withBare<T>(
  args: string[],
  run: (side: Side) => Promise<T>,
  writeCommand: (burst: number, writes: number) => string,
  env?: Readonly<Record<string, string>>,
): Promise<T> {
  const bare = start(args, 'bare server', env);
  try {
    const ready = await bare.next('ready');
    let distinct = typeof ready['distinct'] === 'number' ? ready['distinct'] : undefined;
    return await run({
      server: bare,
      target: String(ready['address']),
      prepare: async (first, changes) => {
        bare.send(`prepare ${first} ${changes}`);
        const prepared = await bare.next('prepared');
        if (typeof prepared['distinct'] === 'number') distinct = prepared['distinct'];
      },
      ...(distinct !== undefined ? { distinct: () => distinct as number } : {}),
      change: async (_first, _changes, b, writes) => {
        bare.send(writeCommand(b, writes));
        await bare.next('written');
      },
    });
  } finally {
    await bare.stop();
  }
}

/** Health flips of endpoints first… as admin PATCH bodies, from all healthy (the config's state). */
function flipper(endpoints: readonly Endpoint[]) {
  const health = endpoints.map(() => true);
  return (first: number, changes: number): { key: string; healthy: boolean }[] =>
    Array.from({ length: changes }, (_, i) => {
      const n = (first + i) % endpoints.length;
      health[n] = !health[n];
      return { key: endpointKey(endpoints[n] as Endpoint), healthy: health[n] as boolean };
    });
}
