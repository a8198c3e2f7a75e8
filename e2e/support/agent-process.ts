/**
 * Runs `canopy agent` as a real child process and follows its JSON logs.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const CLI = fileURLToPath(new URL('../../server/src/cli/canopy.js', import.meta.url));

export interface LogLine {
  msg: string;
  [k: string]: unknown;
}

export interface AgentProcess {
  readonly metricsUrl: string;
  readonly logs: LogLine[];
  /** Resolves with the first log line (from `from` on) that satisfies `pred`. */
  waitForLog(pred: (l: LogLine) => boolean, opts?: { from?: number; timeoutMs?: number }): Promise<LogLine>;
  get(path: string): Promise<unknown>;
  /** SIGTERM (a clean stop) or SIGKILL (a crash). */
  stop(signal?: 'SIGTERM' | 'SIGKILL'): Promise<void>;
  /** Resolves with the exit status once the process has exited on its own or been stopped. */
  readonly exited: Promise<number | null>;
}

/** Runs `canopy agent ARGS` to completion (a subcommand, or a start that fails): its status and output. */
export function runAgentCommand(args: string[]): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CLI, 'agent', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
    child.once('exit', (status) => resolve({ status, stdout, stderr }));
  });
}

const running = new Set<ChildProcess>();
process.once('exit', () => {
  for (const c of running) c.kill('SIGKILL');
});

export async function startAgentProcess(args: string[]): Promise<AgentProcess> {
  const child = spawn(process.execPath, [CLI, 'agent', '--metrics-port', '0', ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  running.add(child);
  child.once('exit', () => running.delete(child));
  const logs: LogLine[] = [];
  const raw: string[] = [];
  const listeners = new Set<() => void>();
  let buf = '';
  child.stdout!.on('data', (chunk: Buffer) => {
    buf += chunk.toString();
    let i;
    while ((i = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      raw.push(line);
      try {
        logs.push(JSON.parse(line) as LogLine);
      } catch {
        logs.push({ msg: line });
      }
      for (const l of listeners) l();
    }
  });
  child.stderr!.on('data', (chunk: Buffer) => raw.push(chunk.toString()));
  let exited = false;
  const exitStatus = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  child.once('exit', () => {
    exited = true;
    for (const l of listeners) l();
  });

  const waitForLog = (
    pred: (l: LogLine) => boolean,
    opts: { from?: number; timeoutMs?: number } = {},
  ): Promise<LogLine> =>
    new Promise((resolve, reject) => {
      const check = (): void => {
        const hit = logs.slice(opts.from ?? 0).find(pred);
        if (hit) {
          done();
          resolve(hit);
        } else if (exited) {
          done();
          reject(new Error(`agent exited:\n${raw.join('\n')}`));
        }
      };
      const timer = setTimeout(() => {
        done();
        reject(new Error(`agent log not seen in time:\n${raw.slice(-30).join('\n')}`));
      }, opts.timeoutMs ?? 15_000);
      const done = (): void => {
        clearTimeout(timer);
        listeners.delete(check);
      };
      listeners.add(check);
      check();
    });

  const ready = await waitForLog((l) => l.msg === 'canopy agent ready');
  const metricsUrl = String(ready['metrics']);
  return {
    metricsUrl,
    logs,
    waitForLog,
    exited: exitStatus,
    get: async (p) => (await fetch(`${metricsUrl}${p}`)).json() as Promise<unknown>,
    stop: (signal = 'SIGTERM') =>
      new Promise((resolve) => {
        if (exited) return resolve();
        child.once('exit', () => resolve());
        child.kill(signal);
      }),
  };
}
