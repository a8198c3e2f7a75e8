/**
 * `npm start` as a user runs it, in a terminal (util-linux `script` gives it one, so the demo stays up):
 * - `prestart` does not rebuild a dist/ that is newer than every source (server/prepare.mjs says so);
 * - a kill of the npm process (from elsewhere, its terminal and shell staying) ends the `node … demo`
 *   child too: SIGTERM (npm passes it on to its child, which `exec` in the script makes the demo itself,
 *   not a shell) and SIGKILL (nothing is passed on; the demo sees its parent gone and stops).
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const SCRIPT = '/usr/bin/script';
const npm = spawnSync('npm', ['--version'], { encoding: 'utf8' });
const skip = !existsSync(SCRIPT)
  ? `${SCRIPT} (util-linux) is missing: no terminal to run npm start in`
  : npm.status !== 0
    ? 'npm is not on PATH'
    : spawnSync(process.execPath, [`${ROOT}server/prepare.mjs`, '--check']).status !== 0
      ? 'dist/ is older than the sources (npm run build first): prestart would rebuild'
      : false;
if (skip) console.log(`# npm start tests skipped: ${skip}`);

/** The pids below `pid`, from /proc (children files of every thread). */
function descendants(pid: number): number[] {
  const out: number[] = [];
  const walk = (p: number) => {
    let tasks: string[] = [];
    try {
      tasks = readdirSync(`/proc/${p}/task`);
    } catch {
      return;
    }
    for (const t of tasks) {
      let kids = '';
      try {
        kids = readFileSync(`/proc/${p}/task/${t}/children`, 'utf8');
      } catch {
        continue;
      }
      for (const k of kids.trim().split(/\s+/).filter(Boolean).map(Number)) {
        out.push(k);
        walk(k);
      }
    }
  };
  walk(pid);
  return out;
}

function cmdline(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ');
  } catch {
    return '';
  }
}

const alive = (pid: number) => existsSync(`/proc/${pid}`) && !/^\S+ \S+ Z/.test(statOf(pid));
function statOf(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8').replace(/\(.*\)/, 'x');
  } catch {
    return '';
  }
}

async function until<T>(what: string, f: () => T | undefined, ms: number, out: () => string): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = f();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`${what} not within ${ms} ms; output:\n${out().slice(-2000)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** `npm start` in a terminal, up until the demo holds; its npm and demo pids. */
async function npmStart(): Promise<{ child: ChildProcess; npm: number; demo: number; output: () => string }> {
  // The shell stays after npm (as a user's interactive shell would), so the terminal is not hung up when npm dies.
  const child = spawn(SCRIPT, ['-qfec', 'npm start; sleep 60', '/dev/null'], {
    cwd: ROOT,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let text = '';
  child.stdout?.on('data', (c: Buffer) => (text += c.toString()));
  child.stderr?.on('data', (c: Buffer) => (text += c.toString()));
  const output = () => text;
  await until('the demo holding', () => (/stay up until Ctrl-C/.test(text) ? true : undefined), 90_000, output);
  const below = descendants(child.pid!);
  const npmPid = below.find((p) => / start\s*$/.test(cmdline(p)) && cmdline(p).includes('npm'));
  const demo = below.find((p) => cmdline(p).includes('canopy.js demo'));
  assert.ok(npmPid && demo, `npm and the demo below script: ${below.map((p) => `${p} ${cmdline(p)}`).join('; ')}`);
  return { child, npm: npmPid, demo, output };
}

describe('npm start', { skip }, () => {
  for (const signal of ['SIGTERM', 'SIGKILL'] as const) {
    it(`a ${signal} to npm ends the demo it started`, async () => {
      const run = await npmStart();
      try {
        assert.match(run.output(), /dist\/ is up to date/, 'prestart did not rebuild');
        assert.doesNotMatch(run.output(), /> tsc /, 'no compiler run');
        process.kill(run.npm, signal);
        await until('the demo gone', () => (alive(run.demo) ? undefined : true), 15_000, run.output);
      } finally {
        for (const p of [run.demo, ...descendants(run.child.pid!)]) if (alive(p)) process.kill(p, 'SIGKILL');
        if (run.child.exitCode === null) run.child.kill('SIGKILL');
      }
    });
  }
});
