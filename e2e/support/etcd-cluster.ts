/**
 * A real three-member etcd cluster (Debian's etcd-server) on loopback, so
 * that a test can take quorum away: stop two members and the third stays up
 * but can neither commit a write nor serve a linearizable read.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort, healthy } from './etcd-process.js';

export interface EtcdMember {
  readonly name: string;
  readonly endpoint: string;
  stop(): Promise<void>;
  /** kill -9: no shutdown, as a crashed machine. */
  kill(): Promise<void>;
  start(): Promise<void>;
  /** Whether this member is the raft leader now (its /metrics' etcd_server_is_leader). */
  isLeader(): Promise<boolean>;
}

export interface EtcdCluster {
  readonly members: readonly EtcdMember[];
  /** host:port of every member, comma-separated, as `--store etcd://…` takes them. */
  readonly endpoints: string;
  destroy(): Promise<void>;
}

/** The member that leads now, asked of each member (undefined when none says so, e.g. mid-election). */
export async function leaderOf(cluster: EtcdCluster): Promise<EtcdMember | undefined> {
  const leading = await Promise.all(cluster.members.map((m) => m.isLeader()));
  return cluster.members[leading.indexOf(true)];
}

const running = new Set<ChildProcess>();
process.once('exit', () => {
  for (const c of running) c.kill('SIGKILL');
});

export async function startEtcdCluster(size = 3): Promise<EtcdCluster> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-etcd-cluster-'));
  const ports = await Promise.all(
    Array.from({ length: size }, async () => [await freePort(), await freePort()] as const),
  );
  const names = ports.map((_, i) => `m${i}`);
  const initialCluster = ports.map(([, peer], i) => `${names[i]}=http://127.0.0.1:${peer}`).join(',');
  const members = ports.map(([client, peer], i) => member(names[i]!, dir, client, peer, initialCluster));
  // Members wait for each other: start all, then wait for each to be healthy.
  await Promise.all(members.map((m) => m.start()));
  return {
    members,
    endpoints: members.map((m) => m.endpoint).join(','),
    destroy: async () => {
      await Promise.all(members.map((m) => m.stop()));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

function member(name: string, dir: string, clientPort: number, peerPort: number, initialCluster: string): EtcdMember {
  const endpoint = `127.0.0.1:${clientPort}`;
  let child: ChildProcess | undefined;
  return {
    name,
    endpoint,
    start: async () => {
      const c = spawn(
        'etcd',
        [
          '--name',
          name,
          '--data-dir',
          path.join(dir, name),
          '--listen-client-urls',
          `http://${endpoint}`,
          '--advertise-client-urls',
          `http://${endpoint}`,
          '--listen-peer-urls',
          `http://127.0.0.1:${peerPort}`,
          '--initial-advertise-peer-urls',
          `http://127.0.0.1:${peerPort}`,
          '--initial-cluster',
          initialCluster,
          '--initial-cluster-state',
          'new',
          '--initial-cluster-token',
          path.basename(dir),
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
      const deadline = Date.now() + 30_000;
      for (;;) {
        if (c.exitCode !== null) throw new Error(`etcd member ${name} exited with ${c.exitCode}:\n${log}`);
        if (await healthy(endpoint)) return;
        if (Date.now() > deadline) throw new Error(`etcd member ${name} did not become healthy:\n${log}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    },
    stop: () => stopChild(child, 'SIGTERM'),
    kill: () => stopChild(child, 'SIGKILL'),
    isLeader: async () => {
      try {
        const r = await fetch(`http://${endpoint}/metrics`, { signal: AbortSignal.timeout(1000) });
        return /^etcd_server_is_leader 1$/m.test(await r.text());
      } catch {
        return false;
      }
    },
  };
}

function stopChild(c: ChildProcess | undefined, signal: NodeJS.Signals): Promise<void> {
  if (!c || c.exitCode !== null || c.signalCode !== null) return Promise.resolve();
  return new Promise<void>((resolve) => {
    const force = setTimeout(() => c.kill('SIGKILL'), 5000);
    c.once('exit', () => {
      clearTimeout(force);
      resolve();
    });
    c.kill(signal);
  });
}
