/**
 * The two servers of the peer benchmark (peer.ts), each behind one `PeerSide`: `canopy serve` and the
 * go-control-plane peer, both started on the same config file and both changed the same way, by an
 * HTTP PATCH of one endpoint's health (Canopy's admin API; the peer serves the same route).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { withFdLimit } from './peer-limits.js';
import { Child } from './server-procs.js';

const CLI = fileURLToPath(new URL('../server/src/cli/canopy.js', import.meta.url));

export interface PeerSide {
  readonly name: 'canopy' | 'go-control-plane';
  /** The go-control-plane peer's mode (bench/peers/go-control-plane `--mode`); Canopy: none. */
  readonly mode?: PeerMode;
  readonly server: Child;
  readonly xds: string;
  readonly admin: string;
  /** Whether the main thread's CPU is the process's own (Go: no main-thread notion; its whole process). */
  readonly mainThread: boolean;
}

/**
 * How the go-control-plane peer hands CLAs to its cache: `protos` (the idiomatic use: the cache marshals
 * them) or `encoded` (each locality-priority group encoded once, a CLA its cached bytes: the strongest).
 */
export type PeerMode = 'protos' | 'encoded';
export const PEER_MODES: readonly PeerMode[] = ['protos', 'encoded'];

/** A child binary speaking JSON lines (the Go programs). */
export function startBinary(file: string, args: string[], what: string): Child {
  const proc = spawn(file, args, { stdio: ['pipe', 'pipe', 'inherit'] });
  return new Child(proc, what);
}

/** Open files a server holding `streams` connections needs: one each, and a margin for everything else. */
const fdsFor = (streams: number): number => streams + 1024;

/** `--peer-canopy-cpus=0` (or `0,1`): Canopy's process pinned to those CPUs (`taskset -c`), for the 1-core/2-core rows. */
const canopyCpus = process.argv.find((a) => a.startsWith('--peer-canopy-cpus='))?.slice('--peer-canopy-cpus='.length);

/** `streams`: the most it will hold at once (its soft limit on open files is raised to fit). */
export async function startCanopy(config: string, streams: number): Promise<PeerSide> {
  // An empty data directory: flips persist in the embedded store.
  const dataDir = mkdtempSync(path.join(path.dirname(config), 'canopy-data-'));
  const args = [CLI, 'serve', '--config', config, '--data-dir', dataDir, '--log-level', 'info'];
  const [file, wrapped] = canopyCpus
    ? withFdLimit('taskset', ['-c', canopyCpus, process.execPath, ...args], fdsFor(streams))
    : withFdLimit(process.execPath, args, fdsFor(streams));
  const server = new Child(spawn(file, wrapped, { stdio: ['pipe', 'pipe', 'inherit'] }), 'canopy');
  const ready = await server.next('canopy ready');
  return { name: 'canopy', server, xds: String(ready['xds']), admin: String(ready['admin']), mainThread: true };
}

export async function startGoPeer(
  binary: string,
  config: string,
  plan: string,
  streams: number,
  mode: PeerMode,
): Promise<PeerSide> {
  // Go raises its soft limit on open files to the hard one itself; the wrapper checks the hard one.
  const peerArgs = ['--config', config, '--plan', plan, '--mode', mode];
  const [file, args] = withFdLimit(binary, peerArgs, fdsFor(streams));
  const server = startBinary(file, args, `go-control-plane peer (${mode})`);
  const ready = await server.next('ready');
  return {
    name: 'go-control-plane',
    mode,
    server,
    xds: String(ready['xds']),
    admin: String(ready['admin']),
    mainThread: false,
  };
}

/** One health change, as an admin API client makes it. */
export async function setHealth(side: PeerSide, service: string, key: string, healthy: boolean): Promise<void> {
  const r = await fetch(`http://${side.admin}/api/v1/services/${service}/endpoints/${encodeURIComponent(key)}`, {
    method: 'PATCH',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ health: healthy ? 'healthy' : 'unhealthy' }),
  });
  if (!r.ok) throw new Error(`${side.name}: PATCH ${key}: ${r.status} ${await r.text()}`);
}
