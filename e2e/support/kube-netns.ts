/**
 * Runs a Kubernetes scenario in a network namespace of its own: the API server
 * refuses EndpointSlice addresses in 127.0.0.0/8 (and ::1), so backends listen
 * on 10.244.x.y and fd00:10:244::x, which the namespace's own loopback
 * interface holds (nothing is routed anywhere). Needs root (or unprivileged
 * user namespaces) and `ip`; skips saying why without them, and fails instead
 * under CI=true.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';

const SETUP =
  'ip link set lo up && ip addr add 10.244.0.1/16 dev lo && ' +
  // IPv6 has no "a prefix on lo is local" as IPv4 has: a local route and non-local binds make it so.
  'ip -6 addr add fd00:10:244::1/64 dev lo nodad && ip -6 route add local fd00:10:244::/64 dev lo table local && ' +
  'sysctl -qw net.ipv6.ip_nonlocal_bind=1';

export function netnsSkip(): string | false {
  if (process.env['CI'] === 'true') return false;
  const r = spawnSync('unshare', ['--net', '--', 'sh', '-c', SETUP], { encoding: 'utf8' });
  return r.status === 0 ? false : `cannot make a network namespace (unshare --net; ip): ${r.stderr.trim() || r.error}`;
}

/** Runs the compiled scenario file under `unshare --net`; its TAP goes to this test's output as comments. */
export async function runInNetns(scenario: string, passes: number): Promise<void> {
  const child = spawn(
    'unshare',
    ['--net', '--', 'sh', '-c', `${SETUP} && exec "$0" --test-reporter=tap "$1"`, process.execPath, scenario],
    // Without the runner's marker, the scenario runs its tests itself, not as a nested runner; TAP on stdout by
    // name (Node 20 picks TAP for a pipe, Node 24 its spec reporter).
    { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, NODE_TEST_CONTEXT: undefined } },
  );
  let out = '';
  child.stdout.on('data', (b: Buffer) => (out += b.toString()));
  child.stderr.on('data', (b: Buffer) => (out += b.toString()));
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  process.stdout.write(out.replace(/^/gm, '# '));
  assert.equal(code, 0, `the scenario failed:\n${out}`);
  assert.match(out, new RegExp(`^# pass ${passes}$`, 'm'));
}
