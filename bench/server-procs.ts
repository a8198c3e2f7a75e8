/**
 * The processes of the server macro run (server.ts): children that speak
 * JSON lines, and what /proc says about a server's CPU time and memory.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { appendFileSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { createInterface, type Interface } from 'node:readline';

const TICK_MS = 10; // /proc/<pid>/stat counts CPU in clock ticks of 10 ms (USER_HZ 100)

/** A child speaking JSON lines on stdout, answering line commands on stdin. */
export class Child {
  private readonly lines: Interface;
  private readonly waiting: { event: string; resolve: (m: Record<string, unknown>) => void }[] = [];
  constructor(
    readonly proc: ChildProcess,
    what: string,
  ) {
    this.lines = createInterface({ input: proc.stdout! });
    const log = process.env['BENCH_LOG_DIR']
      ? path.join(process.env['BENCH_LOG_DIR'], `${what.replace(/\W+/g, '-')}-${proc.pid}.log`)
      : undefined;
    this.lines.on('line', (line) => {
      if (log) appendFileSync(log, `${Date.now()} ${line}\n`);
      let msg: Record<string, unknown>;
      try {
        msg = JSON.parse(line) as Record<string, unknown>;
      } catch {
        return;
      }
      // Canopy's pino lines carry `msg`; the bench children's carry `event`.
      const event = String(msg['event'] ?? msg['msg'] ?? '');
      if (event === 'error') process.stderr.write(`${what}: ${String(msg['detail'])}\n`);
      const i = this.waiting.findIndex((w) => w.event === event);
      if (i >= 0) this.waiting.splice(i, 1)[0]!.resolve(msg);
    });
  }

  next(event: string, timeoutMs = 120_000): Promise<Record<string, unknown>> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no "${event}" within ${timeoutMs} ms`)), timeoutMs);
      this.waiting.push({
        event,
        resolve: (m) => {
          clearTimeout(timer);
          resolve(m);
        },
      });
    });
  }

  send(line: string): void {
    this.proc.stdin!.write(`${line}\n`);
  }

  async stop(): Promise<void> {
    this.proc.stdin?.end();
    this.proc.kill();
    if (this.proc.exitCode === null && this.proc.signalCode === null) await once(this.proc, 'exit');
  }
}

/** `env`: added to this process's environment for the child. */
export function start(args: string[], what: string, env?: Readonly<Record<string, string>>): Child {
  const opts = { stdio: ['pipe', 'pipe', 'inherit'] as ['pipe', 'pipe', 'inherit'], env: { ...process.env, ...env } };
  return new Child(spawn(process.execPath, args, opts), what);
}

/** The process's CPU time, every thread's. */
export function cpuMs(pid: number): number {
  return statCpuMs(`/proc/${pid}/stat`);
}

/**
 * The main thread's CPU time alone (the event loop: JavaScript, the main thread's share of garbage
 * collection, I/O callbacks). The rest of `cpuMs` is other threads: V8's background collector (concurrent
 * marking and sweeping), libuv's pool and worker threads.
 */
export function mainCpuMs(pid: number): number {
  return statCpuMs(`/proc/${pid}/task/${pid}/stat`);
}

/**
 * The process's CPU time in the kernel alone (`stime`, all threads): page faults on fresh memory and the
 * socket writes, which on loopback also carry the receiving side's TCP work. Part of `cpuMs`.
 */
export function systemCpuMs(pid: number): number {
  return statFields(`/proc/${pid}/stat`)[12]! * TICK_MS;
}

function statCpuMs(file: string): number {
  const f = statFields(file);
  return (f[11]! + f[12]!) * TICK_MS;
}

/** /proc/<pid>/stat's fields after the command name, as numbers (index 11 is utime, 12 stime). */
function statFields(file: string): number[] {
  const stat = readFileSync(file, 'utf8');
  return stat
    .slice(stat.lastIndexOf(')') + 2)
    .split(' ')
    .map(Number);
}

export function statusKB(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  return Number(new RegExp(`${field}:\\s+(\\d+)`).exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? NaN);
}

/** Resets the peak RSS (VmHWM) to the current RSS; see proc(5), clear_refs. */
export function resetPeak(pid: number): void {
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, '5');
  } catch {
    // Not permitted here: the peak then counts from the process's start.
  }
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
