/**
 * What the kernel benches share: the service VIP and port, the big service
 * they load, the node the agent runs on, and the connect() timer in C.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { packagePath } from '../server/src/platform/paths.js';
import type { Placement } from '../server/src/domain/locality.js';
import type { ServiceSpec } from '../server/src/domain/service.js';
import { failoverService, makeEndpoints } from './data.js';

export const VIP = '127.100.9.1';
/** Nothing listens on it, nor needs to: a UDP connect() only routes (the VIP itself is on no interface). */
export const VIP6 = 'fd00:c::900';
export const PORT = 9090;

export function bigService(n: number): ServiceSpec {
  return {
    ...failoverService('big', makeEndpoints(n, Math.max(1, Math.min(1000, Math.floor(n / 100))))),
    vip: VIP,
    port: PORT,
  };
}

export const NODE: Placement = {
  locality: { region: 'r1', zone: 'z1', subzone: 's0' },
  network: '',
  node: '',
  cluster: '',
  labels: {},
};

export function connectNs(bin: string, cgroup: string, addr: string, port: number, n: number, sendto = false): number {
  // The shell joins the cgroup, then becomes the benchmark.
  const out = execFileSync(
    'sh',
    ['-c', `echo $$ > "${cgroup}/cgroup.procs" && exec "${bin}" ${addr} ${port} ${n}${sendto ? ' sendto' : ''}`],
    {
      encoding: 'utf8',
    },
  );
  return (JSON.parse(out) as { ns_per_connect: number }).ns_per_connect;
}

export function compileConnectBench(): string | undefined {
  const cc = ['cc', 'gcc', 'clang'].find((c) => spawnSync(c, ['--version'], { stdio: 'ignore' }).status === 0);
  if (!cc) return undefined;
  const bin = path.join(mkdtempSync(path.join(os.tmpdir(), 'canopy-bench-')), 'connect-bench');
  execFileSync(cc, ['-O2', '-o', bin, packagePath('bpf', 'connect-bench.c')]);
  return bin;
}
