/**
 * The transparent-capture listener shape on real Envoy 1.40 with real capture: in a network namespace
 * the test makes, iptables REDIRECTs TCP to 10.96.0.0/16 to port 15001 (uid 1337, Envoy's, exempt, as
 * Istio does), and Envoy — bootstrapped by `canopy bootstrap envoy` without `canopy.outbound_address`,
 * so it gets `outbound|virtual` on 0.0.0.0:15001 with `use_original_dst` and per-port listeners with
 * `bind_to_port: false` — runs as uid 1337 through setpriv. A plain client connecting to a service VIP
 * reaches the nearest backend; two HTTP services sharing port 8080 are told apart by authority; two TCP
 * services sharing port 9000 are told apart by destination address (a filter chain per VIP, tcp_proxy to
 * the service's cluster), each connection landing in the nearest locality; a health PATCH fails over
 * (HTTP and TCP); no update is rejected. Everything runs inside the namespace
 * (e2e/support/transparent-peer.ts); skips naming what is missing (root, ip, iptables NAT, setpriv).
 */
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { envoySkip } from './support/envoy-process.js';

const NS = `canopy-tp-${process.pid}`;
const PEER = fileURLToPath(new URL('./support/transparent-peer.js', import.meta.url));

function run(cmd: string, args: string[]): string | undefined {
  const r = spawnSync(cmd, args, { encoding: 'utf8' });
  return r.status === 0 ? undefined : `${cmd} ${args.join(' ')}: ${(r.stderr || r.error?.message || '').trim()}`;
}

/** Makes the namespace and its capture rules; returns why it cannot. */
function captureSkip(): string | false {
  if (process.getuid?.() !== 0) return 'transparent capture needs root (a network namespace, iptables)';
  for (const tool of ['ip', 'iptables', 'setpriv'])
    if (spawnSync('sh', ['-c', `command -v ${tool}`]).status !== 0) return `${tool} is not installed`;
  const steps: [string, string[]][] = [
    ['ip', ['netns', 'add', NS]],
    ['ip', ['-n', NS, 'link', 'set', 'lo', 'up']],
    ['ip', ['-n', NS, 'route', 'add', 'local', '10.96.0.0/16', 'dev', 'lo']],
    [
      'ip',
      [
        'netns',
        'exec',
        NS,
        'iptables',
        '-t',
        'nat',
        '-A',
        'OUTPUT',
        '-p',
        'tcp',
        '-m',
        'owner',
        '--uid-owner',
        '1337',
        '-j',
        'RETURN',
      ],
    ],
    [
      'ip',
      [
        'netns',
        'exec',
        NS,
        'iptables',
        '-t',
        'nat',
        '-A',
        'OUTPUT',
        '-p',
        'tcp',
        '-d',
        '10.96.0.0/16',
        '-j',
        'REDIRECT',
        '--to-ports',
        '15001',
      ],
    ],
  ];
  for (const [cmd, args] of steps) {
    const why = run(cmd, args);
    if (why) {
      run('ip', ['netns', 'del', NS]);
      return `the kernel or tools refused: ${why}`;
    }
  }
  return false;
}

const envoyMissing = envoySkip();
const skip = envoyMissing || captureSkip();
if (skip && !envoyMissing) console.log(`# transparent capture test skipped: ${skip}`);

interface Outcome {
  error?: string;
  diagnose?: string;
  web: { by: Record<string, number>; failed: Record<string, number> };
  webByVip: { by: Record<string, number>; failed: Record<string, number> };
  api: { by: Record<string, number>; failed: Record<string, number> };
  failoverMs: number;
  db: Record<string, number>;
  cache: Record<string, number>;
  stray: Record<string, number>;
  tcpFailoverMs: number;
  dbAfter: Record<string, number>;
  tcpChains: string[];
  rejected: Record<string, number>;
  uid: string;
  listenerNames: string[];
}

describe('real Envoy, transparent capture: iptables REDIRECT to use_original_dst', { skip }, () => {
  let out: Outcome;
  before(() => {
    const text = execFileSync('ip', ['netns', 'exec', NS, process.execPath, PEER, '1337'], {
      encoding: 'utf8',
      timeout: 60_000,
    });
    out = JSON.parse(text.trim().split('\n').pop()!) as Outcome;
    if (out.error) process.stderr.write(out.diagnose ?? '');
  });
  after(() => {
    run('ip', ['netns', 'del', NS]);
  });

  it('Envoy runs as uid 1337 and holds the virtual listener and the shared port listener', () => {
    assert.equal(out.error, undefined);
    assert.equal(out.uid, '1337');
    assert.deepEqual(out.listenerNames.sort(), ['outbound|0.0.0.0:8080', 'outbound|0.0.0.0:9000', 'outbound|virtual']);
  });

  it('a connect to a VIP reaches its nearest backend; services sharing a port are told apart by authority', () => {
    assert.deepEqual(out.web, { by: { '127.0.0.11': 50 }, failed: {} });
    assert.deepEqual(out.webByVip, { by: { '127.0.0.11': 20 }, failed: {} });
    assert.deepEqual(out.api, { by: { '127.0.0.21': 20 }, failed: {} });
  });

  it('TCP services sharing a port are told apart by destination address and land by locality', () => {
    console.log(`# port 9000 filter chains: ${out.tcpChains.join('; ')}`);
    assert.deepEqual(out.tcpChains.sort(), ['10.96.0.20/32 → db', '10.96.0.21/32 → cache']);
    assert.deepEqual(out.db, { '127.0.0.31': 20 });
    assert.deepEqual(out.cache, { '127.0.0.41': 20 });
    // No chain matches a VIP nobody has: Envoy closes the connection without an answer.
    assert.deepEqual(out.stray, { 'closed empty': 3 });
  });

  it('a health PATCH fails over, and no update was rejected', () => {
    console.log(
      `# failover through captured traffic: HTTP ${out.failoverMs} ms, TCP ${out.tcpFailoverMs} ms (loaded machine)`,
    );
    assert.ok(out.failoverMs < 3000);
    assert.ok(out.tcpFailoverMs < 3000);
    assert.deepEqual(out.dbAfter, { '127.0.0.32': 20 });
    assert.deepEqual(out.rejected, {});
  });
});
