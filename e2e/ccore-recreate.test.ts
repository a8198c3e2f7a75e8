/**
 * gRPC C-core (Python grpcio, as Debian ships it) against a service that is
 * deleted and created again with the same content: the client must recover.
 * C-core 1.51 ignores a RouteConfiguration identical (as parsed) to the one it
 * holds, so it never left "listener does not exist"; the re-created route
 * carries its incarnation as an extra domain, which C-core parses.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { pino } from 'pino';
import { startBackend, type Backend } from '../server/src/demo/backend.js';
import { xdsBootstrap } from '../server/src/demo/bootstrap.js';
import { parseLocality } from '../server/src/domain/locality.js';
import { parseConfig } from '../server/src/domain/spec.js';
import { startCanopy, type Canopy } from '../server/src/main.js';

const CLIENT = fileURLToPath(new URL('../../e2e/support/ccore_client.py', import.meta.url));
// Debian's python3 carries python3-grpcio; a python3 earlier on PATH (pyenv) may not.
const PYTHON =
  process.env['CANOPY_PYTHON'] ??
  (spawnSync('/usr/bin/python3', ['-c', 'import grpc']).status === 0 ? '/usr/bin/python3' : 'python3');
const missing = spawnSync(PYTHON, ['-c', 'import grpc'], { encoding: 'utf8' }).status !== 0;
const skipReason =
  missing && process.env['CI'] !== 'true'
    ? `${PYTHON} has no grpc module (Debian: apt-get install python3-grpcio)`
    : false;

describe('gRPC C-core and a re-created service', { skip: skipReason }, () => {
  let canopy: Canopy;
  let backend: Backend;
  let client: ChildProcess;
  const lines: string[] = [];

  before(async () => {
    assert.ok(!missing, `CI=true and ${PYTHON} has no grpc module: .ci/run installs python3-grpcio`);
    backend = await startBackend({ id: 'cc-1', host: '127.0.0.61', locality: parseLocality('r1/z1/s1') });
    const parsed = parseConfig({
      services: [
        {
          name: 'cc',
          endpoints: [
            { address: '127.0.0.61', port: backend.port, locality: { region: 'r1', zone: 'z1', subzone: 's1' } },
          ],
        },
      ],
    });
    assert.ok(parsed.ok);
    canopy = await startCanopy({
      config: parsed.value,
      host: '127.0.0.1',
      xdsPort: 0,
      adminPort: 0,
      debounceMs: 20,
      logger: pino({ level: 'silent' }),
    });
    const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-ccore-'));
    const bootstrap = path.join(dir, 'bootstrap.json');
    writeFileSync(
      bootstrap,
      JSON.stringify(
        xdsBootstrap({ serverUri: canopy.xdsAddress, nodeId: 'ccore-1', locality: parseLocality('r1/z1/s1') }),
      ),
    );
    client = spawn(PYTHON, [CLIENT, 'xds:///cc', '60'], {
      env: { ...process.env, GRPC_XDS_BOOTSTRAP: bootstrap },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let buf = '';
    client.stdout!.on('data', (chunk: Buffer) => {
      buf += chunk.toString();
      const parts = buf.split('\n');
      buf = parts.pop() ?? '';
      lines.push(...parts);
    });
  });
  after(async () => {
    client?.kill('SIGKILL');
    await canopy?.stop();
    await backend?.stop();
  });

  /** Resolves once a line matching `want` arrives after index `from`; returns its index. */
  async function lineAfter(from: number, want: RegExp, timeoutMs = 20_000): Promise<number> {
    const end = Date.now() + timeoutMs;
    for (;;) {
      const i = lines.findIndex((l, k) => k >= from && want.test(l));
      if (i >= 0) return i;
      if (Date.now() > end)
        throw new Error(`no line matching ${want} after ${from}; last: ${lines.slice(-5).join(' | ')}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  it('recovers when the service comes back with the same content', async () => {
    const first = await lineAfter(0, /^ok$/);
    const spec = canopy.mesh.get('cc')!.spec;
    await canopy.store.delete('cc');
    const failing = await lineAfter(first, /^err /);
    await canopy.store.put(spec, { owner: 'api' });
    await lineAfter(failing + 1, /^ok$/);
  });
});
