/**
 * Drives the C-core xDS peer (ccore_peer.py, under the system python with
 * Debian's python3-grpcio): one process per client, each with its own
 * bootstrap file, since GRPC_XDS_BOOTSTRAP is process-wide in C-core.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { appendFileSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface, type Interface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { Tally } from '../../server/src/demo/xds-client.js';

/** The system python: Debian's python3-grpcio is installed for it, not for a pyenv one. */
export const SYSTEM_PYTHON = '/usr/bin/python3';

const PEER = fileURLToPath(new URL('../../../e2e/support/ccore_peer.py', import.meta.url));

/** Why C-core cannot run here, or undefined when it can. */
export function ccoreMissing(): string | undefined {
  const r = spawnSync(SYSTEM_PYTHON, ['-c', 'import grpc; print(grpc.__version__)'], { encoding: 'utf8' });
  if (r.error) return `${SYSTEM_PYTHON} not found`;
  if (r.status !== 0) return `python3-grpcio is not installed for ${SYSTEM_PYTHON} (apt-get install python3-grpcio)`;
  return undefined;
}

/**
 * Debugging: CCORE_TRACE (GRPC_TRACE, e.g. xds_client,xds_resolver,cds_lb), CCORE_VERBOSITY (GRPC_VERBOSITY)
 * and CCORE_LOGDIR (a directory for each peer's stderr, named by pid) pass through to the peers.
 */
export class CCoreClient {
  private readonly child: ChildProcess;
  private readonly lines: Interface;
  private readonly pending: ((line: string) => void)[] = [];
  private stderr = '';

  constructor(target: string, bootstrap: object) {
    const dir = mkdtempSync(path.join(tmpdir(), 'canopy-ccore-'));
    const file = path.join(dir, 'bootstrap.json');
    writeFileSync(file, JSON.stringify(bootstrap));
    this.child = spawn(SYSTEM_PYTHON, [PEER, target], {
      env: {
        ...process.env,
        GRPC_XDS_BOOTSTRAP: file,
        GRPC_VERBOSITY: process.env['CCORE_VERBOSITY'] ?? 'ERROR',
        ...(process.env['CCORE_TRACE'] ? { GRPC_TRACE: process.env['CCORE_TRACE'] } : {}),
      },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const logDir = process.env['CCORE_LOGDIR'];
    this.child.stderr!.on('data', (d: Buffer) => {
      this.stderr = (this.stderr + d.toString()).slice(-4000);
      if (logDir) appendFileSync(path.join(logDir, `${this.child.pid}.log`), d);
    });
    this.lines = createInterface({ input: this.child.stdout! });
    this.lines.on('line', (l) => this.pending.shift()?.(l));
  }

  private read(timeoutMs: number): Promise<string> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`C-core peer silent for ${timeoutMs} ms; stderr: ${this.stderr}`)),
        timeoutMs,
      );
      this.pending.push((l) => {
        clearTimeout(timer);
        resolve(l);
      });
    });
  }

  async ready(): Promise<void> {
    await this.read(15_000);
  }

  /** `n` calls, one after another; with `rps`, paced at that rate. */
  async tally(n: number, deadlineMs = 2000, rps?: number): Promise<Tally> {
    const reply = this.read(n * deadlineMs + (rps ? (n / rps) * 1000 : 0) + 10_000);
    this.child.stdin!.write(`${JSON.stringify({ tally: n, deadline_ms: deadlineMs, ...(rps ? { rps } : {}) })}\n`);
    const r = JSON.parse(await reply) as { by_backend: Record<string, number>; failures: number; last_error: string };
    return {
      byBackend: new Map(Object.entries(r.by_backend)),
      failures: r.failures,
      ...(r.last_error ? { lastError: r.last_error } : {}),
    };
  }

  /** Samples until `ok` holds; bounded in time. */
  async waitUntil(ok: (t: Tally) => boolean, timeoutMs = 20_000, sample = 10): Promise<Tally> {
    const end = Date.now() + timeoutMs;
    let last: Tally | undefined;
    while (Date.now() < end) {
      last = await this.tally(sample, 500);
      if (ok(last)) return last;
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(
      `condition not met in ${timeoutMs} ms; last tally ${JSON.stringify(last && [...last.byBackend])} failures ${last?.failures} ${last?.lastError ?? ''}`,
    );
  }

  close(): Promise<void> {
    return new Promise((resolve) => {
      if (this.child.exitCode !== null) return resolve();
      this.child.once('exit', () => resolve());
      this.child.stdin!.end();
      setTimeout(() => this.child.kill('SIGKILL'), 3000).unref();
    });
  }
}
