/**
 * Runs `canopy serve` as a real child process on loopback, with ephemeral
 * ports, and talks to its admin API over HTTP.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { dump as stringify } from 'js-yaml';

const CLI = fileURLToPath(new URL('../../server/src/cli/canopy.js', import.meta.url));

export interface AdminResponse {
  status: number;
  body: unknown;
}

export interface CanopyProcess {
  readonly xdsUri: string;
  readonly adminUrl: string;
  readonly configPath: string;
  logs(): string[];
  admin(method: 'GET' | 'PUT' | 'PATCH' | 'DELETE', path: string, body?: unknown): Promise<AdminResponse>;
  stop(): Promise<number | null>;
  /** kill -9: no shutdown sequence at all. */
  kill(): Promise<void>;
  readonly pid: number;
}

/** Children still running when this process exits (a failed or killed test run) are killed with it. */
const running = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of running) child.kill('SIGKILL');
});

/** `config` is an object written as YAML, or the file's text as it is (e.g. Istio, Kuma or Kubernetes documents). */
/** `nodeArgs` go to node before the CLI (e.g. `--max-old-space-size=160`). */
/** `configFile`: serve this file as the test left it (`config` is then not written). */
export async function startCanopyProcess(
  config: object | string,
  extraArgs: string[] = [],
  opts: { readonly nodeArgs?: readonly string[]; readonly configFile?: string } = {},
): Promise<CanopyProcess> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-e2e-'));
  const configPath = opts.configFile ?? path.join(dir, 'mesh.yaml');
  if (!opts.configFile) writeFileSync(configPath, typeof config === 'string' ? config : stringify(config));
  const child = spawn(
    process.execPath,
    [
      ...(opts.nodeArgs ?? []),
      CLI,
      'serve',
      '--config',
      configPath,
      '--host',
      '127.0.0.1',
      '--xds-port',
      '0',
      '--admin-port',
      '0',
      // Each process its own embedded database, unless the test names one (a restart keeps it).
      ...(extraArgs.includes('--data-dir') || extraArgs.some((a) => a.startsWith('--store'))
        ? []
        : ['--data-dir', path.join(dir, 'data')]),
      ...extraArgs,
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  running.add(child);
  child.once('exit', () => running.delete(child));
  const lines: string[] = [];
  const ready = new Promise<{ xds: string; admin: string }>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`canopy did not become ready:\n${lines.join('\n')}`)), 15_000);
    let buf = '';
    child.stdout?.on('data', (chunk: Buffer) => {
      buf += chunk.toString();
      let i;
      while ((i = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        lines.push(line);
        // Serving is enough to talk to it; a server waiting for a source (Kubernetes) says "not ready yet" first.
        if (line.includes('"canopy ready"') || line.includes('"canopy serving; not ready yet')) {
          clearTimeout(timer);
          const parsed = JSON.parse(line) as { xds: string; admin: string };
          resolve(parsed);
        }
      }
    });
    child.stderr?.on('data', (chunk: Buffer) => lines.push(chunk.toString()));
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`canopy exited with ${code}:\n${lines.join('\n')}`));
      // After it was ready, the test sees only failed requests: say why the server went away.
      if (code !== 0 && signal === null)
        process.stderr.write(`canopy exited with ${code}; its last output:\n${lines.slice(-20).join('\n')}\n`);
    });
  });
  let addresses: { xds: string; admin: string };
  try {
    addresses = await ready;
  } catch (err) {
    child.kill('SIGKILL');
    throw err;
  }
  const adminUrl = `http://${addresses.admin}`;
  return {
    xdsUri: addresses.xds,
    adminUrl,
    configPath,
    logs: () => lines,
    admin: async (method, p, body) => {
      const res = await fetch(`${adminUrl}${p}`, {
        method,
        ...(body !== undefined ? { body: JSON.stringify(body), headers: { 'content-type': 'application/json' } } : {}),
      });
      return { status: res.status, body: parseBody(await res.text()) };
    },
    stop: () => stopChild(child),
    kill: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGKILL');
      }),
    pid: child.pid ?? 0,
  };
}

function parseBody(text: string): unknown {
  if (!text) return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

function stopChild(child: ChildProcess): Promise<number | null> {
  // Already gone (a kill -9 leaves exitCode null and signalCode set): waiting for 'exit' would never end.
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(child.exitCode);
  return new Promise((resolve) => {
    const force = setTimeout(() => child.kill('SIGKILL'), 8000);
    child.once('exit', (code) => {
      clearTimeout(force);
      resolve(code);
    });
    child.kill('SIGTERM');
  });
}
