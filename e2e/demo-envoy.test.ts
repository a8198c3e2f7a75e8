/**
 * `canopy demo --envoy --exit` (`npm start -- --envoy --exit`) as a real process: docker-compose.yml's
 * topology as plain processes, with real Envoy 1.40 sidecars.
 * - Two Canopy replicas on one etcd (one replica, said so, without etcd; CI installs it), both in each
 *   Envoy's bootstrap.
 * - Requests through each sidecar land in its nearest locality; after the demo marks zone us-east-1a
 *   unhealthy the us-east sidecar's requests move to us-east-1b.
 * - The replica holding an Envoy's ADS stream is killed under traffic: 0 failed requests, the Envoy
 *   reconnects to the survivor, and a change made through the survivor brings its requests back.
 * - The node agent loads the trees where the kernel allows (root, BPF, cgroup v2, bpffs; required under
 *   CANOPY_REQUIRE_KERNEL=1): a plain connect() to the VIP reaches the nearest backend, then the failover's.
 * - Nothing the demo started outlives it: at the end, and on SIGINT in the middle of the run.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import os from 'node:os';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { envoySkip } from './support/envoy-process.js';
import { hasEtcd } from './support/etcd-process.js';
import { kernelEnv } from './support/kernel.js';

const CLI = fileURLToPath(new URL('../server/src/cli/canopy.js', import.meta.url));
const skip = envoySkip();
const kernel = skip ? {} : kernelEnv();
const twoReplicas = hasEtcd() || process.env['CI'] === 'true';

/** Whether anything still answers HTTP at `url`. */
const answers = (url: string) =>
  fetch(url, { signal: AbortSignal.timeout(2000) }).then(
    () => true,
    () => false,
  );

/** Every HTTP address the demo printed (replicas' admin APIs, Envoy admins, etcd): none may answer after it. */
async function stillUp(out: string): Promise<string[]> {
  const urls = [
    ...[...out.matchAll(/admin API on (http:\/\/[\d.:]+)/g)].map((m) => m[1]!),
    ...[...out.matchAll(/admin (http:\/\/[\d.:]+)/g)].map((m) => `${m[1]!}/ready`),
    ...[...out.matchAll(/store etcd:\/\/([\d.:]+)\//g)].map((m) => `http://${m[1]!}/health`),
  ];
  assert.ok(urls.length >= 3, out);
  const up: string[] = [];
  for (const u of urls) if (await answers(u)) up.push(u);
  return up;
}

/** Live processes still in process group `pgid` (the demo's: it runs detached, and its children inherit it). */
function groupLeft(pgid: number): string[] {
  const left: string[] = [];
  for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      // pid (comm) state ppid pgrp ...: comm may hold spaces, so count from its closing parenthesis.
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      // A zombie has exited (its new parent has not reaped it yet): only live processes count.
      if (Number(fields[2]) === pgid && fields[0] !== 'Z')
        left.push(readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' '));
    } catch {
      // gone meanwhile
    }
  }
  return left;
}

/** The scratch directories the --envoy demo makes (etcd's data, the replicas' config, each Envoy's). */
function scratch(): string[] {
  return readdirSync(os.tmpdir()).filter((d) => /^canopy-demo-(config|etcd|envoy)-/.test(d));
}

/**
 * `canopy demo --envoy --exit` in a process group of its own; with `interruptAt`, SIGINT once its output
 * shows that text. Its output and exit status, and what it left once it exited: live processes of its
 * group, and scratch directories it made.
 */
async function demo(interruptAt?: string): Promise<{ out: string; code: number | null; left: string[] }> {
  const before = new Set(scratch());
  const child = spawn(process.execPath, [CLI, 'demo', '--envoy', '--exit'], {
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  let out = '';
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const onData = (d: Buffer) => {
    out += d.toString();
    if (!interruptAt || !out.includes(interruptAt)) return;
    interruptAt = undefined;
    child.kill('SIGINT');
  };
  child.stdout.on('data', onData);
  child.stderr.on('data', onData);
  const timer = setTimeout(() => child.kill('SIGKILL'), 150_000);
  try {
    const code = await exited;
    // The demo's children go with it: give a busy machine time to reap them, then report what is left.
    const left = () => [...groupLeft(child.pid!), ...scratch().filter((d) => !before.has(d))];
    for (const end = Date.now() + 15_000; left().length > 0 && Date.now() < end;)
      await new Promise((r) => setTimeout(r, 100));
    return { out, code, left: left() };
  } finally {
    clearTimeout(timer);
    // A test that failed half-way must not leave the demo's processes behind.
    try {
      process.kill(-child.pid!, 'SIGKILL');
    } catch {
      // none left
    }
  }
}

describe('canopy demo --envoy', { skip, timeout: 180_000 }, () => {
  it('routes by locality through Envoy, fails over, survives a replica loss, loads the agent', async () => {
    const { out, code, left } = await demo();
    assert.equal(code, 0, out);
    const section = (title: string) => out.slice(out.indexOf(title)).split('\n\n')[0]!;

    if (twoReplicas) {
      assert.match(out, /store etcd:\/\/127\.0\.0\.1:\d+\/canopy-demo\/ \(shared by 2 replicas\)/);
      assert.match(out, /each bootstrapped with every replica \(127\.0\.0\.1:\d+, 127\.0\.0\.1:\d+\)/);
    } else assert.match(out, /One Canopy replica: no etcd on PATH/);

    const before = section('Through the Envoy sidecars');
    assert.match(before, /Envoy in us-east\/us-east-1a\/rack1 +-> 127\.0\.0\.11 \(us-east\/us-east-1a\/rack1\) x60$/m);
    assert.match(before, /Envoy in eu-west\/eu-west-1b\/rack7 +-> 127\.0\.0\.15 \(eu-west\/eu-west-1b\/rack1\) x60$/m);
    const after = section('After the failover, through the Envoy sidecars');
    assert.match(after, /Envoy in us-east\/us-east-1a\/rack1 +-> 127\.0\.0\.13 \(us-east\/us-east-1b\/rack1\) x60$/m);

    if (twoReplicas) {
      assert.match(out, /Killing replica canopy-\d \(kill -9, pid \d+\)/);
      assert.match(out, /the Envoy in us-east\/us-east-1a\/rack1 reconnected to canopy-\d \d+ ms after the kill/);
      const loss =
        /Replica loss: (\d+) requests through the Envoy sidecars while canopy-\d was lost, (\d+) failed/.exec(out);
      assert.ok(loss, out);
      assert.ok(Number(loss[1]) >= 40, `traffic during the loss: ${loss[1]} requests`);
      assert.equal(loss[2], '0', 'no request failed while a replica was lost');
      // The zone was marked healthy again through the survivor: the us-east Envoy is back on its nearest backend.
      const survived = section('After losing canopy-');
      assert.match(
        survived,
        /Envoy in us-east\/us-east-1a\/rack1 +-> 127\.0\.0\.11 \(us-east\/us-east-1a\/rack1\) x60$/m,
      );
      assert.match(
        survived,
        /Envoy in eu-west\/eu-west-1b\/rack7 +-> 127\.0\.0\.15 \(eu-west\/eu-west-1b\/rack1\) x60$/m,
      );
    }

    if (kernel.reason === undefined) {
      assert.match(out, /Node agent in us-east\/us-east-1a\/rack1: loaded/);
      const vip = [
        ...out.matchAll(/plain connect\(\) to the VIP 127\.0\.0\.10:50051 from that cgroup \(10 calls\) -> (.*)$/gm),
      ];
      assert.deepEqual(
        vip.map((m) => m[1]),
        ['127.0.0.11 x10', '127.0.0.13 x10'],
        'the kernel sends VIP connects to the nearest backend, then past the unhealthy zone',
      );
      const cgroup = /attached to cgroup (\S+)\)/.exec(out)?.[1];
      assert.ok(cgroup && !existsSync(cgroup), `the demo's cgroup ${cgroup} is removed`);
    } else assert.match(out, /Node agent: skipped \(/);

    assert.doesNotMatch(out.replace(/, 0 failed/, ''), /failed/);
    assert.deepEqual(await stillUp(out), [], 'every process the demo started has stopped');
    assert.deepEqual(left, [], 'no process or scratch directory of the demo is left');
  });

  it('stops everything it started on SIGINT', async () => {
    // Interrupted with etcd, both replicas and the first Envoy up, and the second Envoy starting.
    const { out, code, left } = await demo('Envoy sidecar in us-east/us-east-1a/rack1');
    assert.equal(code, 130, out);
    assert.deepEqual(await stillUp(out), [], 'every process the demo started has stopped');
    assert.deepEqual(left, [], 'no process or scratch directory of the demo is left');
  });
});
