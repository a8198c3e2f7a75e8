/**
 * A real Kubernetes API server for the tests: the kube-apiserver that
 * e2e/support/kube/build.sh builds from k8s.io/kubernetes, on a real etcd
 * (Debian's etcd-server), on loopback with a throwaway service-account key,
 * its own self-signed serving certificate and static bearer tokens. No
 * controllers and no kubelets run: tests write Nodes, Services and
 * EndpointSlices themselves.
 *
 * Tests skip, saying why, when the binary is not built; under CI=true they
 * fail instead (.ci/run builds it).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash, generateKeyPairSync, randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort, startEtcd, type EtcdProcess } from './etcd-process.js';

const MODULE_DIR = fileURLToPath(new URL('../../../e2e/support/kube/', import.meta.url));

/** Where build.sh puts the binary for the module's current files (the same key it computes). */
export function kubeApiserverPath(): string {
  if (process.env['CANOPY_KUBE_APISERVER']) return process.env['CANOPY_KUBE_APISERVER'];
  const files = [
    'go.mod',
    'go.sum',
    ...readdirSync(path.join(MODULE_DIR, 'cmd'))
      .sort()
      .map((d) => `cmd/${d}/main.go`),
  ];
  const hash = createHash('sha256');
  for (const f of files) hash.update(readFileSync(path.join(MODULE_DIR, f)));
  const key = hash.digest('hex').slice(0, 16);
  const cache =
    process.env['CANOPY_KUBE_CACHE'] ??
    path.join(process.env['XDG_CACHE_HOME'] ?? path.join(os.homedir(), '.cache'), 'canopy-kube');
  return path.join(cache, key, 'kube-apiserver');
}

/** The reason Kubernetes tests skip, or false when they must run (CI=true fails instead of skipping). */
export function kubeSkip(): string | false {
  if (existsSync(kubeApiserverPath()) || process.env['CI'] === 'true') return false;
  return `kube-apiserver is not built (run e2e/support/kube/build.sh; expected ${kubeApiserverPath()})`;
}

export interface KubeApiserver {
  readonly url: string;
  readonly port: number;
  /** The etcd it stores in, HOST:PORT (a test may compact it: what forces a watch to re-list). */
  readonly etcdEndpoint: string;
  /** A kubeconfig for `user` (default the admin, in system:masters), or for a bearer token; `server` e.g. a proxy. */
  kubeconfig(user?: string, opts?: { readonly server?: string; readonly token?: string }): string;
  /** Stops the API server only (etcd keeps the state). */
  stop(): Promise<void>;
  /** Starts it again on the same port, certificate and etcd. */
  restart(): Promise<void>;
  destroy(): Promise<void>;
  logs(): string;
  /** A raw request as the admin (JSON in and out): objects client-node's typed models would reshape. */
  request(method: string, path: string, body?: unknown): Promise<{ status: number; body: unknown }>;
}

export interface KubeApiserverOptions {
  /** RBAC instead of AlwaysAllow. */
  readonly rbac?: boolean;
  /** Users with a bearer token each besides `admin`: name → groups. */
  readonly users?: Readonly<Record<string, readonly string[]>>;
}

const running = new Set<ChildProcess>();
process.once('exit', () => {
  for (const c of running) c.kill('SIGKILL');
});

export async function startKubeApiserver(opts: KubeApiserverOptions = {}): Promise<KubeApiserver> {
  const bin = kubeApiserverPath();
  if (!existsSync(bin)) throw new Error(`kube-apiserver is not built: run e2e/support/kube/build.sh (${bin})`);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-kube-'));
  const etcd: EtcdProcess = await startEtcd();
  const port = await freePort();
  const url = `https://127.0.0.1:${port}`;
  const { publicKey, privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  writeFileSync(path.join(dir, 'sa.pub'), publicKey.export({ type: 'spki', format: 'pem' }));
  writeFileSync(path.join(dir, 'sa.key'), privateKey.export({ type: 'pkcs8', format: 'pem' }));
  const tokens = new Map<string, string>();
  const users: Record<string, readonly string[]> = { admin: ['system:masters'], ...opts.users };
  const rows = Object.entries(users).map(([user, groups], i) => {
    const token = randomBytes(16).toString('hex');
    tokens.set(user, token);
    return `${token},${user},uid-${i},"${groups.join(',')}"`;
  });
  writeFileSync(path.join(dir, 'tokens.csv'), `${rows.join('\n')}\n`);
  const args = [
    `--etcd-servers=http://${etcd.endpoint}`,
    '--bind-address=127.0.0.1',
    '--advertise-address=127.0.0.1',
    `--secure-port=${port}`,
    `--cert-dir=${path.join(dir, 'certs')}`,
    '--service-account-issuer=https://kubernetes.default.svc',
    `--service-account-key-file=${path.join(dir, 'sa.pub')}`,
    `--service-account-signing-key-file=${path.join(dir, 'sa.key')}`,
    // Dual-stack, as most clusters now: a Service may ask for a cluster IP of each family.
    '--service-cluster-ip-range=10.96.0.0/16,fd00:10:96::/108',
    `--token-auth-file=${path.join(dir, 'tokens.csv')}`,
    `--authorization-mode=${opts.rbac ? 'RBAC' : 'AlwaysAllow'}`,
    // One process among many on a shared machine: no request queuing, no API server identity leases.
    '--enable-priority-and-fairness=false',
    '--endpoint-reconciler-type=none',
    // As kubeadm, kind and managed clusters run it: the node agent's DaemonSet is privileged (bpffs, cgroups).
    '--allow-privileged=true',
    '--v=0',
  ];
  let child: ChildProcess | undefined;
  let log = '';
  const caFile = (): string => path.join(dir, 'certs', 'apiserver.crt');
  const start = async (): Promise<void> => {
    const c = spawn(bin, args, { stdio: ['ignore', 'ignore', 'pipe'] });
    child = c;
    running.add(c);
    c.once('exit', () => running.delete(c));
    c.stderr?.on('data', (b: Buffer) => {
      log = (log + b.toString()).slice(-20_000);
    });
    const deadline = Date.now() + 90_000;
    for (;;) {
      if (c.exitCode !== null) throw new Error(`kube-apiserver exited with ${c.exitCode}:\n${log}`);
      if (existsSync(caFile()) && (await ready(url, caFile(), tokens.get('admin')!))) return;
      if (Date.now() > deadline) throw new Error(`kube-apiserver was not ready within 90 s:\n${log}`);
      await new Promise((r) => setTimeout(r, 250));
    }
  };
  const stop = async (): Promise<void> => {
    const c = child;
    if (!c || c.exitCode !== null || c.signalCode !== null) return;
    await new Promise<void>((resolve) => {
      const force = setTimeout(() => c.kill('SIGKILL'), 10_000);
      c.once('exit', () => {
        clearTimeout(force);
        resolve();
      });
      c.kill('SIGTERM');
    });
  };
  await start();
  return {
    url,
    port,
    etcdEndpoint: etcd.endpoint,
    kubeconfig: (user = 'admin', o = {}) => {
      const token = o.token ?? tokens.get(user);
      if (!token) throw new Error(`no user ${user}`);
      const file = path.join(dir, `kubeconfig-${user}-${randomBytes(4).toString('hex')}.yaml`);
      writeFileSync(file, kubeconfigText(o.server ?? url, caFile(), user, token));
      return file;
    },
    stop,
    restart: start,
    destroy: async () => {
      await stop();
      await etcd.destroy();
      rmSync(dir, { recursive: true, force: true });
    },
    logs: () => log,
    request: (method, p, body) => rawRequest(`${url}${p}`, caFile(), tokens.get('admin')!, method, body),
  };
}

function kubeconfigText(server: string, ca: string, user: string, token: string): string {
  return JSON.stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'test', cluster: { server, 'certificate-authority': ca } }],
    users: [{ name: user, user: { token } }],
    contexts: [{ name: 'test', context: { cluster: 'test', user } }],
    'current-context': 'test',
  });
}

function ready(url: string, caFile: string, token: string): Promise<boolean> {
  return new Promise((resolve) => {
    const req = https.get(
      `${url}/readyz`,
      { ca: readFileSync(caFile), headers: { authorization: `Bearer ${token}` }, timeout: 2000 },
      (res) => {
        res.resume();
        resolve(res.statusCode === 200);
      },
    );
    req.on('error', () => resolve(false));
    req.on('timeout', () => req.destroy());
  });
}

function rawRequest(
  url: string,
  caFile: string,
  token: string,
  method: string,
  body?: unknown,
): Promise<{ status: number; body: unknown }> {
  return new Promise((resolve, reject) => {
    const req = https.request(
      url,
      {
        method,
        ca: readFileSync(caFile),
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json' },
      },
      (res) => {
        let text = '';
        res.on('data', (b: Buffer) => (text += b.toString()));
        res.on('end', () => {
          let parsed: unknown = text || undefined;
          try {
            parsed = text ? (JSON.parse(text) as unknown) : undefined;
          } catch {
            // not JSON (a plain-text 404 of a path not served yet): the text itself
          }
          resolve({ status: res.statusCode ?? 0, body: parsed });
        });
      },
    );
    req.on('error', reject);
    req.end(body === undefined ? undefined : JSON.stringify(body));
  });
}
