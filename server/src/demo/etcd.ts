/**
 * `canopy demo --envoy`: the store the two Canopy replicas share, as in docker-compose.yml: one etcd member
 * (Debian's etcd-server, or any `etcd` on PATH) on free loopback ports with its data in a fresh temporary
 * directory, removed at the end.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { CodedError } from '../domain/errors.js';
import { freePort, stopProcess, tail } from './processes.js';
import type { Teardown } from './teardown.js';

export interface DemoEtcd {
  /** HOST:PORT of its client URL. */
  readonly endpoint: string;
}

/** Why there is no etcd to run, or undefined when there is. */
export function etcdMissing(): string | undefined {
  const r = spawnSync('etcd', ['--version'], { stdio: 'ignore', timeout: 10_000 });
  return r.status === 0 ? undefined : 'no etcd on PATH (Debian: apt-get install etcd-server)';
}

export async function startEtcd(teardown: Teardown): Promise<DemoEtcd> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-demo-etcd-'));
  teardown.add(() => rmSync(dir, { recursive: true, force: true }));
  const [client, peer] = [await freePort(), await freePort()];
  const endpoint = `127.0.0.1:${client}`;
  const peerUrl = `http://127.0.0.1:${peer}`;
  const child = spawn(
    'etcd',
    [
      ...['--name', 'canopy-demo', '--data-dir', path.join(dir, 'data')],
      ...['--listen-client-urls', `http://${endpoint}`, '--advertise-client-urls', `http://${endpoint}`],
      ...['--listen-peer-urls', peerUrl, '--initial-advertise-peer-urls', peerUrl],
      ...['--initial-cluster', `canopy-demo=${peerUrl}`],
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  teardown.track(child);
  teardown.add(() => stopProcess(child));
  const log = tail(child.stderr);
  const deadline = Date.now() + 15_000;
  for (;;) {
    const ok = await fetch(`http://${endpoint}/health`, { signal: AbortSignal.timeout(1000) }).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) return { endpoint };
    if (child.exitCode !== null || Date.now() > deadline)
      throw new CodedError('CANOPY_PEER_FAILED', `etcd did not become healthy:\n${log()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
