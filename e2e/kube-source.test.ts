/**
 * Runs e2e/kube-source-scenario.ts in a network namespace of its own: the
 * Kubernetes API server refuses EndpointSlice addresses in 127.0.0.0/8, so
 * the scenario's backends listen on 10.244.x.y, which the namespace's own
 * loopback interface holds (nothing is routed anywhere). Needs root (or
 * unprivileged user namespaces) and `ip`; skips saying why without them, and
 * fails instead under CI=true.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { kubeSkip } from './support/kube-apiserver.js';

const SCENARIO = fileURLToPath(new URL('./kube-source-scenario.js', import.meta.url));
const SETUP = 'ip link set lo up && ip addr add 10.244.0.1/16 dev lo';

function netnsSkip(): string | false {
  if (process.env['CI'] === 'true') return false;
  const r = spawnSync('unshare', ['--net', '--', 'sh', '-c', SETUP], { encoding: 'utf8' });
  return r.status === 0 ? false : `cannot make a network namespace (unshare --net; ip): ${r.stderr.trim() || r.error}`;
}

describe('Kubernetes source, real API server, real gRPC clients (own network namespace)', () => {
  it('passes every scenario test', { skip: kubeSkip() || netnsSkip(), timeout: 240_000 }, async () => {
    const child = spawn(
      'unshare',
      ['--net', '--', 'sh', '-c', `${SETUP} && exec "$0" --test-reporter=tap "$1"`, process.execPath, SCENARIO],
      // Without the runner's marker, the scenario runs its tests itself, not as a nested runner; TAP on stdout
      // by name (Node 20 picks TAP for a pipe, Node 24 its spec reporter).
      { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, NODE_TEST_CONTEXT: undefined } },
    );
    let out = '';
    child.stdout.on('data', (b: Buffer) => (out += b.toString()));
    child.stderr.on('data', (b: Buffer) => (out += b.toString()));
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    process.stdout.write(out.replace(/^/gm, '# '));
    assert.equal(code, 0, `the scenario failed:\n${out}`);
    assert.match(out, /^# pass 7$/m);
  });
});
