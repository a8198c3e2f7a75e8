/**
 * What the kernel tests need from the machine: the BPF build, root, a cgroup
 * v2 hierarchy and bpffs. Each test skips with the reason printed when
 * something is missing, except under CANOPY_REQUIRE_KERNEL=1 (CI), where a
 * missing piece fails the run instead, so CI cannot pass by skipping.
 */
import { execFile, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, readFileSync, rmdirSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { kernelUnavailable } from '../../server/src/agent/bpf.js';

function mountOf(type: string): string | undefined {
  for (const line of readFileSync('/proc/mounts', 'utf8').split('\n')) {
    const [, dir, fstype] = line.split(' ');
    if (fstype === type && dir) return dir;
  }
  return undefined;
}

function ensureMount(type: 'cgroup2' | 'bpf', preferred: string): string | undefined {
  const have = mountOf(type);
  if (have) return have;
  mkdirSync(preferred, { recursive: true });
  const r = spawnSync('mount', ['-t', type, type === 'bpf' ? 'bpf' : 'none', preferred]);
  return r.status === 0 ? preferred : undefined;
}

let checked: { reason?: string; cgroupRoot?: string; bpffs?: string } | undefined;

export function kernelEnv(): { reason?: string; cgroupRoot?: string; bpffs?: string } {
  if (checked) return checked;
  let reason = kernelUnavailable();
  let cgroupRoot: string | undefined;
  let bpffs: string | undefined;
  if (!reason) {
    cgroupRoot = ensureMount('cgroup2', path.join(os.tmpdir(), 'canopy-cgroup2'));
    bpffs = ensureMount('bpf', '/sys/fs/bpf');
    if (!cgroupRoot) reason = 'no cgroup v2 hierarchy (mount -t cgroup2 none DIR failed)';
    else if (!bpffs) reason = 'no bpffs (mount -t bpf bpf /sys/fs/bpf failed)';
  }
  if (reason && process.env['CANOPY_REQUIRE_KERNEL'] === '1') {
    throw new Error(`CANOPY_REQUIRE_KERNEL=1 but the kernel tests cannot run: ${reason}`);
  }
  if (reason) console.log(`# kernel tests skipped: ${reason}`);
  checked = { ...(reason ? { reason } : {}), ...(cgroupRoot ? { cgroupRoot } : {}), ...(bpffs ? { bpffs } : {}) };
  return checked;
}

/** A fresh cgroup (and pin dir) for one test file; removed by cleanup(). */
export function testCgroup(name: string): { dir: string; pinDir: string; child(n: string): string; cleanup(): void } {
  const env = kernelEnv();
  const dir = path.join(env.cgroupRoot!, `canopy-${name}-${process.pid}`);
  const pinDir = path.join(env.bpffs!, `canopy-${name}-${process.pid}`);
  mkdirSync(dir, { recursive: true });
  const children: string[] = [];
  return {
    dir,
    pinDir,
    child(n: string) {
      const c = path.join(dir, n);
      mkdirSync(c, { recursive: true });
      children.push(c);
      return c;
    },
    cleanup() {
      rmSync(pinDir, { recursive: true, force: true });
      for (const c of [...children.reverse(), dir]) {
        // A cgroup goes once it has no processes: move any left to the root.
        try {
          for (const pid of readFileSync(path.join(c, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean)) {
            writeFileSync(path.join(env.cgroupRoot!, 'cgroup.procs'), pid);
          }
          rmdirSoon(c);
        } catch {
          // already gone or busy; the next run uses another name
        }
      }
    },
  };
}

/** A TCP backend that writes its id and closes: what a connect reached. */
export async function idBackend(
  host: string,
  port: number,
  id: string,
): Promise<{ id: string; host: string; port: number; close(): Promise<void> }> {
  const server = net.createServer((s) => s.end(id));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  const addr = server.address() as net.AddressInfo;
  return { id, host, port: addr.port, close: () => new Promise((r) => server.close(() => r())) };
}

const CONNECTOR = path.join(path.dirname(fileURLToPath(import.meta.url)), 'connector.js');

export interface ConnectResult {
  ids: string[];
  errors: Record<string, number>;
}

/** The workload process, placed in `cgroupDir` before it connects anywhere. */
export class Connector {
  private readonly child: ChildProcess;
  private readonly lines: AsyncIterator<string>;

  private constructor(child: ChildProcess) {
    this.child = child;
    this.lines = readline.createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
  }

  static async start(cgroupDir: string): Promise<Connector> {
    const child = spawn(process.execPath, [CONNECTOR], { stdio: ['pipe', 'pipe', 'inherit'] });
    const c = new Connector(child);
    const hello = JSON.parse(await c.next()) as { pid: number };
    writeFileSync(path.join(cgroupDir, 'cgroup.procs'), String(hello.pid));
    return c;
  }

  private async next(): Promise<string> {
    const r = await this.lines.next();
    if (r.done) throw new Error('connector exited');
    return r.value;
  }

  private async ask<T>(cmd: object): Promise<T> {
    this.child.stdin!.write(`${JSON.stringify(cmd)}\n`);
    return JSON.parse(await this.next()) as T;
  }

  connect(host: string, port: number, n: number): Promise<ConnectResult> {
    return this.ask({ op: 'connect', host, port, n });
  }

  async loop(host: string, port: number): Promise<void> {
    await this.ask({ op: 'loop', host, port });
  }

  async stop(): Promise<[number, string][]> {
    return (await this.ask<{ samples: [number, string][] }>({ op: 'stop' })).samples;
  }

  close(): void {
    this.child.kill('SIGKILL');
  }
}

export function counts(ids: readonly string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const id of ids) out[id] = (out[id] ?? 0) + 1;
  return out;
}

/** Connects from inside `cgroup` and reports what the socket says its peer is. */
const CLIENT = `
import net from 'node:net';
import dgram from 'node:dgram';
const [host, port, proto] = process.argv.slice(1);
const done = (o) => { console.log(JSON.stringify(o)); process.exit(0); };
setTimeout(() => done({ error: 'timeout' }), 5000);
if (proto === 'sendto') {
  const s = dgram.createSocket(host.includes(':') ? 'udp6' : 'udp4');
  const got = [];
  s.on('message', (m, r) => {
    got.push({ id: String(m), from: { address: r.address, port: r.port } });
    if (got.length === 3) done({ replies: got });
  });
  for (let i = 0; i < 3; i++) s.send('hi', Number(port), host);
} else if (proto === 'udp') {
  const s = dgram.createSocket(host.includes(':') ? 'udp6' : 'udp4');
  s.connect(Number(port), host, () => {
    s.once('message', (m, r) => done({ id: String(m), peer: s.remoteAddress(), from: { address: r.address, port: r.port } }));
    s.send('hi');
  });
} else {
  const c = net.connect(Number(port), host);
  let id = '';
  let peer;
  c.on('connect', () => { peer = { address: c.remoteAddress, port: c.remotePort }; });
  c.on('data', (d) => { id += d; });
  c.on('end', () => done({ id, peer }));
  c.on('error', (e) => done({ error: e.code }));
}`;

export interface Seen {
  id?: string;
  peer?: { address: string; port: number };
  from?: { address: string; port: number };
  error?: string;
  replies?: { id: string; from: { address: string; port: number } }[];
}

/** (Asynchronous: the backends live in this process.) */
export async function peerClient(
  cgroup: string,
  host: string,
  port: number,
  proto: 'tcp' | 'udp' | 'sendto',
): Promise<Seen> {
  const { stdout: out } = await promisify(execFile)(
    'sh',
    [
      '-c',
      `echo $$ > "${cgroup}/cgroup.procs" && exec "${process.execPath}" --input-type=module -e "$0" "$1" "$2" "$3"`,
      CLIENT,
      host,
      String(port),
      proto,
    ],
    {
      encoding: 'utf8',
      timeout: 10_000,
    },
  );
  return JSON.parse(out.trim().split('\n').pop()!) as Seen;
}

/**
 * rmdir of a cgroup, waiting up to 2 s while it is busy: a process that has just exited (a connect helper
 * stopped a moment before) still counts in its cgroup until the kernel reaps it, and a cgroup left behind
 * piles up on the host, one per run.
 */
function rmdirSoon(dir: string): void {
  for (let i = 0; ; i++) {
    try {
      rmdirSync(dir);
      return;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EBUSY' || i >= 40) throw err;
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 50);
    }
  }
}
