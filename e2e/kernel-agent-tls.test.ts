/**
 * `canopy agent` against a `canopy serve` with TLS and mTLS on xDS (docs/security.md's steps): with
 * --ca-file, --cert-file and --key-file (a certificate whose SPIFFE ID names its node), the flags
 * every command that talks to Canopy takes, it loads the server's trees into the kernel.
 */
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { startAgentProcess, type AgentProcess, type LogLine } from './support/agent-process.js';
import { startCanopyProcess, type CanopyProcess } from './support/canopy-process.js';
import { hasOpenssl, makeTestCa, type TestCa } from './support/certs.js';
import { kernelEnv, testCgroup } from './support/kernel.js';

const env = kernelEnv();
const skip =
  env.reason ?? (!hasOpenssl() && process.env['CI'] !== 'true' ? 'openssl is not installed (Debian openssl)' : false);

const applied = (l: LogLine) => l.msg === 'tree version applied';

describe('canopy agent over TLS', { skip }, () => {
  let ca: TestCa;
  let canopy: CanopyProcess;
  let agent: AgentProcess | undefined;
  let cg: ReturnType<typeof testCgroup>;

  before(async () => {
    ca = makeTestCa();
    const cert = ca.server();
    cg = testCgroup('agent-tls');
    canopy = await startCanopyProcess(
      {
        services: [{ name: 'web', vip: '127.100.0.9', port: 8089, endpoints: [{ address: '127.0.0.91', port: 8089 }] }],
      },
      ['--tls-cert', cert.certFile, '--tls-key', cert.keyFile, '--client-ca', ca.caFile],
    );
  });
  after(async () => {
    await agent?.stop();
    await canopy?.stop();
    const { Datapath } = await import('../server/src/agent/datapath.js');
    if (cg) {
      try {
        Datapath.open({ pinDir: cg.pinDir, cgroup: cg.dir }).close({ detach: true, cgroup: cg.dir });
      } catch {
        // nothing pinned
      }
      cg.cleanup();
    }
    if (ca) rmSync(ca.dir, { recursive: true, force: true });
  });

  it('loads the trees with --ca-file, --cert-file and --key-file', async () => {
    const client = ca.client('spiffe://canopy.test/ns/default/node-tls');
    agent = await startAgentProcess([
      ...['--server', canopy.xdsUri, '--node-id', 'node-tls', '--region', 'r1'],
      ...['--cgroup', cg.dir, '--pin-dir', cg.pinDir],
      ...['--ca-file', ca.caFile, '--cert-file', client.certFile, '--key-file', client.keyFile],
    ]);
    const line = await agent.waitForLog(applied, { timeoutMs: 15_000 });
    assert.ok(line, 'a tree version was applied over TLS');
    assert.ok(agent.logs.some((l) => l.msg === 'connected to canopy'));
  });
});
