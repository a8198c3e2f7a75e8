/**
 * `canopy demo` (what `npm start` runs) as a real process: without a terminal
 * (scripts, CI) it runs and exits; in a terminal (a pseudo-terminal from
 * util-linux `script`) it stays up with the web view it prints until Ctrl-C.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

const CLI = fileURLToPath(new URL('../server/src/cli/canopy.js', import.meta.url));
const SCRIPT = '/usr/bin/script';
const WEB_VIEW = /Web view: (http:\/\/127\.0\.0\.1:\d+\/ui\/)/;

/** Collects a child's output and resolves `when(text)` matches, or rejects on exit or timeout. */
function watch(child: ChildProcess) {
  let text = '';
  const waiters: (() => void)[] = [];
  const onData = (chunk: Buffer) => {
    text += chunk.toString();
    for (const w of waiters) w();
  };
  child.stdout?.on('data', onData);
  child.stderr?.on('data', onData);
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return {
    output: () => text,
    exited,
    when(re: RegExp, ms: number): Promise<RegExpExecArray> {
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no ${re} within ${ms} ms:\n${text}`)), ms);
        const check = () => {
          const m = re.exec(text);
          if (m) {
            clearTimeout(timer);
            resolve(m);
          }
        };
        waiters.push(check);
        void exited.then((code) => {
          clearTimeout(timer);
          reject(new Error(`exited with ${code} before ${re}:\n${text}`));
        });
        check();
      });
    },
  };
}

describe('canopy demo', () => {
  it('without a terminal, runs, prints the web view URL and exits 0', async () => {
    const child = spawn(process.execPath, [CLI, 'demo'], { stdio: ['ignore', 'pipe', 'pipe'] });
    const out = watch(child);
    const timer = setTimeout(() => child.kill('SIGKILL'), 90_000);
    const code = await out.exited;
    clearTimeout(timer);
    assert.equal(code, 0, out.output());
    assert.match(out.output(), /After the failover/);
    assert.match(out.output(), WEB_VIEW);
  });

  it('in a terminal, keeps the server and its clients up for the web view until Ctrl-C', async (t) => {
    if (!existsSync(SCRIPT)) {
      t.skip(`${SCRIPT} (util-linux) is missing: no pseudo-terminal to run the demo in`);
      return;
    }
    // script gives the demo a pseudo-terminal; what we write to its stdin is typed at that terminal.
    // `exec`: the demo itself (not a shell waiting on it) leads the terminal's session, whatever $SHELL script picks.
    const child = spawn(
      SCRIPT,
      ['-qfec', `exec ${JSON.stringify(process.execPath)} ${JSON.stringify(CLI)} demo`, '/dev/null'],
      {
        stdio: ['pipe', 'pipe', 'pipe'],
      },
    );
    const out = watch(child);
    try {
      const [, url] = await out.when(WEB_VIEW, 90_000);
      await out.when(/stay up until Ctrl-C/, 5000);
      const page = await fetch(url ?? '');
      assert.equal(page.status, 200);
      assert.match(await page.text(), /<title>Canopy/);
      const view = (await (await fetch(new URL('/ui/api/services/echo', url))).json()) as { clients: unknown[] };
      assert.equal(view.clients.length, 4, "the demo's four xDS clients are still connected");
      child.stdin?.write('\x03');
      const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
      const code = await out.exited;
      clearTimeout(timer);
      // The tail first: that is where a failed shutdown says why.
      assert.equal(code, 0, `exit ${code}; the demo's last output:\n${out.output().slice(-3000)}`);
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
    }
  });
});
