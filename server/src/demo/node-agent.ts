/**
 * `canopy demo --envoy`: the node agent of docker-compose.yml as a plain process (`canopy agent`), when the
 * kernel allows it (root, the BPF build, a cgroup v2 hierarchy and bpffs already mounted; the demo mounts
 * nothing). It attaches to a cgroup of its own under the cgroup v2 root, pins under bpffs, and loads the
 * locality trees one replica streams it; a workload in that cgroup then reaches a nearby backend with a
 * plain connect() to the service's VIP. At the end the agent is stopped, uninstalled (programs detached,
 * pins removed) and its cgroup removed.
 */
import { execFile, spawn } from 'node:child_process';
import { mkdirSync, readFileSync, rmdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { kernelUnavailable } from '../agent/bpf.js';
import { CodedError } from '../domain/errors.js';
import type { Locality } from '../domain/locality.js';
import { stopProcess, tail } from './processes.js';
import type { Teardown } from './teardown.js';

const CLI = fileURLToPath(new URL('../cli/canopy.js', import.meta.url));
const VIP_CALLER = fileURLToPath(new URL('./vip-caller.js', import.meta.url));

function mountOf(type: string): string | undefined {
  for (const line of readFileSync('/proc/mounts', 'utf8').split('\n')) {
    const [, dir, fstype] = line.split(' ');
    if (fstype === type && dir) return dir;
  }
  return undefined;
}

/** Where the agent can attach and pin, or why it cannot run here. */
export function agentPlace(): { cgroupRoot: string; bpffs: string } | { reason: string } {
  const reason = kernelUnavailable();
  if (reason) return { reason };
  const cgroupRoot = mountOf('cgroup2');
  if (!cgroupRoot) return { reason: 'no cgroup v2 hierarchy mounted' };
  const bpffs = mountOf('bpf');
  if (!bpffs) return { reason: 'no bpffs mounted (mount -t bpf bpf /sys/fs/bpf)' };
  return { cgroupRoot, bpffs };
}

export interface DemoAgent {
  readonly cgroup: string;
  readonly metricsAddress: string;
  /** N plain gRPC calls to VIP:PORT from a process in the agent's cgroup: the backend ids that answered. */
  callVip(vip: string, port: number, n: number): Promise<string[]>;
}

export async function startDemoAgent(
  place: { cgroupRoot: string; bpffs: string },
  xds: string,
  locality: Locality,
  teardown: Teardown,
): Promise<DemoAgent> {
  const cgroup = path.join(place.cgroupRoot, `canopy-demo-${process.pid}`);
  const pinDir = path.join(place.bpffs, `canopy-demo-${process.pid}`);
  mkdirSync(cgroup, { recursive: true });
  teardown.add(() => rmdirSync(cgroup));
  teardown.add(() => rmSync(pinDir, { recursive: true, force: true }));
  teardown.add(() =>
    promisify(execFile)(process.execPath, [CLI, 'agent', 'uninstall', '--cgroup', cgroup, '--pin-dir', pinDir]).then(
      () => {},
    ),
  );
  const child = spawn(
    process.execPath,
    [
      ...[CLI, 'agent', '--server', xds, '--node-id', `demo-node-${process.pid}`],
      ...['--region', locality.region, '--zone', locality.zone, '--subzone', locality.subzone],
      ...['--cgroup', cgroup, '--pin-dir', pinDir, '--metrics-port', '0'],
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  teardown.track(child);
  teardown.add(() => stopProcess(child));
  const log = tail(child.stderr);
  const metricsAddress = await new Promise<string | undefined>((resolve) => {
    const timer = setTimeout(() => resolve(undefined), 30_000);
    child.once('exit', () => resolve(undefined));
    let metrics = '';
    readline.createInterface({ input: child.stdout! }).on('line', (line) => {
      let l: { msg?: string; metrics?: string } = {};
      try {
        l = JSON.parse(line) as typeof l;
      } catch {
        return;
      }
      metrics ||= l.metrics ?? '';
      if (l.msg !== 'tree version applied') return;
      clearTimeout(timer);
      resolve(metrics);
    });
  });
  if (metricsAddress === undefined) {
    await stopProcess(child, 1000);
    throw new CodedError('CANOPY_PEER_FAILED', `the node agent did not load a tree:\n${log()}`);
  }
  return {
    cgroup,
    metricsAddress,
    async callVip(vip, port, n) {
      const { stdout } = await promisify(execFile)(
        process.execPath,
        [VIP_CALLER, cgroup, vip, String(port), String(n)],
        {
          timeout: 20_000,
        },
      );
      return JSON.parse(stdout.trim().split('\n').pop() ?? '[]') as string[];
    },
  };
}
