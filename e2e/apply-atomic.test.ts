/**
 * `canopy apply` all or nothing (issue 33), through the CLI against a running
 * `canopy serve`, on the embedded store and on etcd: a file whose first
 * service is valid and whose second clashes with a running service on a TCP
 * port is refused whole (before, the first was created and the command
 * exited 1), `--dry-run` says the same and writes nothing, and once the
 * clash is fixed the real run does exactly what the dry run printed.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { runCanopyCli } from './support/canopy-cli.js';
import { startCanopyProcess, type CanopyProcess } from './support/canopy-process.js';
import { etcdSkip, startEtcd, type EtcdProcess } from './support/etcd-process.js';

const db = {
  name: 'db',
  port: 5432,
  vip: '10.9.0.1',
  protocol: 'tcp',
  endpoints: [{ address: '10.9.1.1', port: 5432 }],
};
const web = { name: 'web', endpoints: [{ address: '10.9.2.1', port: 8080 }] };
// On its own a valid file; beside the running db, two TCP services on local port 5432 (domain/outbound.ts).
const db2 = {
  name: 'db2',
  port: 5432,
  vip: '10.9.0.2',
  protocol: 'tcp',
  endpoints: [{ address: '10.9.3.1', port: 5432 }],
};

const dirs: string[] = [];
after(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function file(services: object[]): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-apply-'));
  dirs.push(dir);
  const f = path.join(dir, 'apply.json');
  writeFileSync(f, JSON.stringify({ services }));
  return f;
}

const backends: [string, string | false, () => Promise<{ args: string[]; stop: () => Promise<void> }>][] = [
  ['LevelDB', false, async () => ({ args: [], stop: async () => {} })],
  [
    'etcd',
    etcdSkip(),
    async () => {
      const etcd: EtcdProcess = await startEtcd();
      return { args: ['--store', `etcd://${etcd.endpoint}/canopy-apply/`], stop: () => etcd.destroy() };
    },
  ],
];

for (const [name, skip, backend] of backends) {
  describe(`canopy apply, all or nothing (${name})`, { skip }, () => {
    let server: CanopyProcess;
    let stopBackend: () => Promise<void>;
    let admin: string[];
    before(async () => {
      const b = await backend();
      stopBackend = b.stop;
      server = await startCanopyProcess({ services: [db] }, b.args);
      admin = ['--admin', server.adminUrl];
    });
    after(async () => {
      await server?.stop();
      await stopBackend?.();
    });

    it('a file whose second service clashes on a TCP port writes nothing, dry run or not', async () => {
      const f = file([web, db2]);
      assert.equal((await runCanopyCli(['validate', f])).code, 0, 'the file alone is valid');
      for (const dry of [['--dry-run'], []]) {
        const r = await runCanopyCli(['apply', '-f', f, ...dry, ...admin]);
        assert.equal(r.code, 1, r.stdout);
        assert.match(r.stderr, /service\/db2 rejected \(400\): port: local outbound port 5432 is also service "db"'s/);
        assert.match(r.stderr, /nothing applied/);
        assert.doesNotMatch(r.stdout, /service\/web/, 'web is not reported as created');
        assert.equal((await server.admin('GET', '/api/v1/services/web')).status, 404, `web not written (${dry})`);
        assert.equal((await server.admin('GET', '/api/v1/services/db2')).status, 404);
      }
    });

    it('the fixed file: the real run does exactly what the dry run printed', async () => {
      const changedDb = { ...db, endpoints: [...db.endpoints, { address: '10.9.1.2', port: 5432 }] };
      const f = file([web, { ...db2, outboundPort: 15432 }, changedDb]);
      const dry = await runCanopyCli(['apply', '-f', f, '--dry-run', ...admin]);
      assert.equal(dry.code, 0, dry.stderr);
      assert.equal((await server.admin('GET', '/api/v1/services/web')).status, 404, 'the dry run wrote nothing');
      const real = await runCanopyCli(['apply', '-f', f, ...admin]);
      assert.equal(real.code, 0, real.stderr);
      assert.equal(dry.stdout.replaceAll(' (dry run)', ''), real.stdout);
      assert.match(real.stdout, /^service\/web created\n/m);
      assert.match(real.stdout, /^service\/db2 created\n/m);
      assert.match(real.stdout, /^service\/db configured\n {2}\+ 10\.9\.1\.2:5432/m);
      for (const s of ['web', 'db2']) assert.equal((await server.admin('GET', `/api/v1/services/${s}`)).status, 200);
      const again = await runCanopyCli(['apply', '-f', f, ...admin]);
      assert.equal(again.stdout, 'service/web unchanged\nservice/db2 unchanged\nservice/db unchanged\n');
    });
  });
}
