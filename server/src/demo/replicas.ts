/**
 * `canopy demo --envoy`: Canopy replicas as plain processes (`canopy serve`), as docker-compose.yml runs
 * them: the same config file, and with etcd the same store, so a write through either admin API reaches the
 * clients of both. Each binds free loopback ports and says which in its "canopy ready" log line.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import { dump } from 'js-yaml';
import { CodedError } from '../domain/errors.js';
import type { ServiceSpec } from '../domain/service.js';
import { stopProcess, tail } from './processes.js';
import type { Teardown } from './teardown.js';

const CLI = fileURLToPath(new URL('../cli/canopy.js', import.meta.url));

export interface Replica {
  readonly name: string;
  readonly pid: number;
  /** HOST:PORT of its ADS server. */
  readonly xdsAddress: string;
  /** HOST:PORT of its admin API. */
  readonly adminAddress: string;
  /** kill -9: the replica is lost, with no shutdown sequence. */
  kill(): Promise<void>;
}

/** Where the replicas keep services: etcd (shared) or, without it, one replica's own data directory. */
export type ReplicaStore = { readonly etcd: string } | { readonly dataDir: string };

/** The config file the replicas share (one file for all: two on one etcd prefix would fight over services). */
export function writeReplicaConfig(service: ServiceSpec, teardown: Teardown): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-demo-config-'));
  teardown.add(() => rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'mesh.yaml');
  writeFileSync(file, dump({ server: { debounceMs: 100 }, services: [service] }));
  return file;
}

export async function startReplica(
  name: string,
  configFile: string,
  store: ReplicaStore,
  teardown: Teardown,
): Promise<Replica> {
  const storeArgs = 'etcd' in store ? ['--store', `etcd://${store.etcd}/canopy-demo/`] : ['--data-dir', store.dataDir];
  const child = spawn(
    process.execPath,
    [CLI, 'serve', '--config', configFile, '--host', '127.0.0.1', '--xds-port', '0', '--admin-port', '0', ...storeArgs],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  teardown.track(child);
  teardown.add(() => stopProcess(child));
  const log = tail(child.stderr);
  const ready = await new Promise<{ xds: string; admin: string } | undefined>((resolve) => {
    const timer = setTimeout(() => resolve(undefined), 30_000);
    child.once('exit', () => resolve(undefined));
    readline.createInterface({ input: child.stdout! }).on('line', (line) => {
      if (!line.includes('"canopy ready"')) return;
      clearTimeout(timer);
      resolve(JSON.parse(line) as { xds: string; admin: string });
    });
  });
  if (!ready) {
    await stopProcess(child, 1000);
    throw new CodedError('CANOPY_PEER_FAILED', `replica ${name} did not become ready:\n${log()}`);
  }
  return {
    name,
    pid: child.pid ?? 0,
    xdsAddress: ready.xds,
    adminAddress: ready.admin,
    kill: () => stopProcess(child, 0, 'SIGKILL'),
  };
}
