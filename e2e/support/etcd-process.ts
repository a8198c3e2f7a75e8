/**
 * A real etcd (Debian's etcd-server) on loopback for store tests: free ports,
 * its own data directory, started and stopped (or killed) by the test.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

export interface EtcdProcess {
  readonly endpoint: string;
  /** Stops it (SIGTERM, then SIGKILL); the data directory stays for restart(). */
  stop(): Promise<void>;
  /** Starts it again on the same ports and data. */
  restart(): Promise<void>;
  /** Stops it and removes its data. */
  destroy(): Promise<void>;
}

export function hasEtcd(): boolean {
  return spawnSync('etcd', ['--version'], { stdio: 'ignore' }).status === 0;
}

/** The reason etcd tests skip, or false when they must run (CI=true fails instead of skipping). */
export function etcdSkip(): string | false {
  if (hasEtcd() || process.env['CI'] === 'true') return false;
  return 'etcd is not installed (Debian package etcd-server)';
}

const running = new Set<ChildProcess>();
process.once('exit', () => {
  for (const c of running) c.kill('SIGKILL');
});

export async function startEtcd(): Promise<EtcdProcess> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-etcd-'));
  const [clientPort, peerPort] = [await freePort(), await freePort()];
  const endpoint = `127.0.0.1:${clientPort}`;
  let child: ChildProcess | undefined;
  const start = async (): Promise<void> => {
    const c = spawn(
      'etcd',
      [
        '--name',
        'canopy-test',
        '--data-dir',
        path.join(dir, 'data'),
        '--listen-client-urls',
        `http://${endpoint}`,
        '--advertise-client-urls',
        `http://${endpoint}`,
        '--listen-peer-urls',
        `http://127.0.0.1:${peerPort}`,
        '--initial-advertise-peer-urls',
        `http://127.0.0.1:${peerPort}`,
        '--initial-cluster',
        `canopy-test=http://127.0.0.1:${peerPort}`,
        // Room for large services: one transaction carries every endpoint of a PUT (etcd's default --max-txn-ops suffices).
        '--max-request-bytes',
        String(64 * 1024 * 1024),
      ],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    child = c;
    running.add(c);
    c.once('exit', () => running.delete(c));
    let log = '';
    c.stderr?.on('data', (b: Buffer) => {
      log = (log + b.toString()).slice(-4000);
    });
    const deadline = Date.now() + 15_000;
    for (;;) {
      if (c.exitCode !== null) throw new Error(`etcd exited with ${c.exitCode}:\n${log}`);
      if (await healthy(endpoint)) return;
      if (Date.now() > deadline) throw new Error(`etcd did not become healthy:\n${log}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  };
  const stop = async (): Promise<void> => {
    const c = child;
    if (!c || c.exitCode !== null || c.signalCode !== null) return;
    await new Promise<void>((resolve) => {
      const force = setTimeout(() => c.kill('SIGKILL'), 5000);
      c.once('exit', () => {
        clearTimeout(force);
        resolve();
      });
      c.kill('SIGTERM');
    });
  };
  await start();
  return {
    endpoint,
    stop,
    restart: start,
    destroy: async () => {
      await stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Whether an etcd member answers its /health. */
export async function healthy(endpoint: string): Promise<boolean> {
  try {
    const r = await fetch(`http://${endpoint}/health`, { signal: AbortSignal.timeout(1000) });
    return r.ok;
  } catch {
    return false;
  }
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}
