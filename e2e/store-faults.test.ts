/**
 * Store faults are loud (issue 19, section 5), on a real `canopy serve`:
 *
 * - a full disk (a small tmpfs mounted here, as root) answers 507 with
 *   CANOPY_STORE_FULL, /readyz says not ready until a write succeeds, and
 *   the server recovers once space is freed, without a restart and without
 *   losing what it acknowledged before, during or after;
 * - a truncated or damaged LevelDB log is noticed: the start is refused
 *   naming the directory and what was lost, unless --accept-store-loss;
 * - an unusable data directory fails the start naming the path and why.
 *
 * Mounting needs root: without it the full-disk tests skip and say so.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import {
  closeSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  rmSync,
  statfsSync,
  statSync,
  truncateSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { dump as stringify } from 'js-yaml';
import { startCanopyProcess, type CanopyProcess } from './support/canopy-process.js';

const CLI = fileURLToPath(new URL('../server/src/cli/canopy.js', import.meta.url));

/** Mounts a tmpfs of `size` at a new directory, or says why it cannot. */
function mountTmpfs(size: string, options = ''): { dir: string; unmount(): void } | string {
  if (process.getuid?.() !== 0) return 'mounting a small tmpfs to fill needs root';
  const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-tmpfs-'));
  const r = spawnSync('mount', ['-t', 'tmpfs', '-o', `size=${size}${options ? `,${options}` : ''}`, 'tmpfs', dir], {
    encoding: 'utf8',
  });
  if (r.status !== 0) {
    rmSync(dir, { recursive: true, force: true });
    return `cannot mount a tmpfs: ${r.stderr.trim() || r.error?.message}`;
  }
  return {
    dir,
    unmount: () => {
      spawnSync('umount', ['-l', dir]);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

const probe = mountTmpfs('1m');
const skip = typeof probe === 'string' ? probe : false;
if (typeof probe !== 'string') probe.unmount();

const service = (i: number, n = 60) => ({
  endpoints: Array.from({ length: n }, (_, k) => ({
    address: `10.${30 + (i % 200)}.${Math.floor(k / 250)}.${(k % 250) + 1}`,
    port: 8000 + (i % 1000),
    locality: { region: 'r1', zone: `zone-with-a-long-name-${k % 5}` },
    labels: { app: `service-${i}`, version: 'v1' },
  })),
});

describe('a full disk under the embedded store', { skip }, () => {
  let fs: { dir: string; unmount(): void };
  let server: CanopyProcess | undefined;
  const dataDir = () => path.join(fs.dir, 'data');
  const filler = () => path.join(fs.dir, 'filler');
  before(() => {
    const m = mountTmpfs('8m');
    if (typeof m === 'string') throw new Error(m);
    fs = m;
  });
  after(async () => {
    await server?.kill();
    fs?.unmount();
  });

  it('answers 507 CANOPY_STORE_FULL, is not ready until a write succeeds, and recovers without a restart or a loss', async () => {
    server = await startCanopyProcess({ services: [] }, ['--data-dir', dataDir()]);
    const acked: number[] = [];
    const put = async (i: number) => {
      const r = await server!.admin('PUT', `/api/v1/services/svc-${i}`, service(i));
      if (r.status === 201) acked.push(i);
      return r;
    };
    for (let i = 0; i < 5; i++) assert.equal((await put(i)).status, 201);

    // Fill what is left.
    const { bavail, bsize } = statfsSync(fs.dir);
    writeFileSync(filler(), Buffer.alloc(Number(bavail) * Number(bsize)));
    let refused: { status: number; body: unknown } | undefined;
    for (let i = 5; i < 40 && !refused; i++) {
      const r = await put(i);
      if (r.status !== 201) refused = r;
    }
    assert.ok(refused, 'a write on a full disk is refused');
    assert.equal(refused.status, 507, JSON.stringify(refused.body));
    const error = (refused.body as { error: { code: string; message: string } }).error;
    assert.equal(error.code, 'CANOPY_STORE_FULL');
    assert.match(error.message, /disk is full/);
    assert.match(error.message, new RegExp(dataDir().replace(/[.*+?^${}()|[\]\\]/g, '\\$&')));
    const notReady = await server.admin('GET', '/readyz');
    assert.equal(notReady.status, 503, 'not ready while writes cannot be stored');
    // Still refused while full (and still not a 500).
    assert.equal((await put(100)).status, 507);

    rmSync(filler());
    // Ready again without any client write: the store probes the disk.
    await until(async () => (await server!.admin('GET', '/readyz')).status === 200, 10_000);
    for (let i = 200; i < 205; i++) assert.equal((await put(i)).status, 201);

    // Everything acknowledged, before and after the full disk, is there after a restart.
    await server.stop();
    server = await startCanopyProcess({ services: [] }, ['--data-dir', dataDir()]);
    const list = (await server.admin('GET', '/api/v1/services')).body as { services: { name: string }[] };
    const names = new Set(list.services.map((s) => s.name));
    assert.deepEqual(
      acked.filter((i) => !names.has(`svc-${i}`)),
      [],
      `acknowledged: ${acked.length}`,
    );
  });
});

describe('a truncated or damaged LevelDB log', () => {
  const root = mkdtempSync(path.join(os.tmpdir(), 'canopy-trunc-'));
  const started: CanopyProcess[] = [];
  after(async () => {
    for (const p of started) await p.kill();
    rmSync(root, { recursive: true, force: true });
  });

  /** 30 services acknowledged, then kill -9: they live only in LevelDB's log (no compaction yet). */
  async function thirtyServices(dataDir: string): Promise<void> {
    const p = await startCanopyProcess({ services: [] }, ['--data-dir', dataDir]);
    started.push(p);
    for (let i = 0; i < 30; i++)
      assert.equal((await p.admin('PUT', `/api/v1/services/svc-${i}`, service(i))).status, 201);
    await p.kill();
  }
  const logFile = (dataDir: string) => {
    const logs = readdirSync(dataDir).filter((f) => f.endsWith('.log'));
    return path.join(
      dataDir,
      logs.sort((a, b) => statSync(path.join(dataDir, b)).size - statSync(path.join(dataDir, a)).size)[0]!,
    );
  };
  const serve = (dataDir: string, extra: string[] = []) =>
    spawnSync(
      process.execPath,
      [
        CLI,
        'serve',
        '--config',
        emptyConfig(root),
        '--data-dir',
        dataDir,
        '--xds-port',
        '0',
        '--admin-port',
        '0',
        ...extra,
      ],
      {
        encoding: 'utf8',
        timeout: 20_000,
      },
    );

  for (const [what, damage] of [
    ['truncated', (file: string) => truncateSync(file, Math.floor(statSync(file).size / 2))],
    [
      'damaged in the middle',
      (file: string) => {
        const fd = openSync(file, 'r+');
        writeSync(fd, Buffer.alloc(64, 0xa5), 0, 64, Math.floor(statSync(file).size / 3));
        closeSync(fd);
      },
    ],
  ] as const) {
    it(`${what}: refuses to start naming the directory and the loss; starts with --accept-store-loss and logs it`, async () => {
      const dataDir = path.join(root, what.replace(/ /g, '-'));
      await thirtyServices(dataDir);
      damage(logFile(dataDir));

      const refused = serve(dataDir);
      assert.equal(refused.status, 1, refused.stdout + refused.stderr);
      assert.match(refused.stderr, new RegExp(`data directory ${dataDir}`));
      assert.match(refused.stderr, /lost acknowledged writes/);
      assert.match(refused.stderr, /--accept-store-loss/);

      const p = await startCanopyProcess({ services: [] }, ['--data-dir', dataDir, '--accept-store-loss']);
      started.push(p);
      const list = (await p.admin('GET', '/api/v1/services')).body as { services: unknown[] };
      assert.ok(list.services.length < 30, `${list.services.length} of 30 services recovered`);
      assert.ok(p.logs().some((l) => l.includes('accepted a store loss') && l.includes(dataDir)));
      // The recovered state is now the one on record: a plain start works again.
      assert.equal((await p.admin('PUT', '/api/v1/services/after', service(99))).status, 201);
      await p.stop();
      const again = await startCanopyProcess({ services: [] }, ['--data-dir', dataDir]);
      started.push(again);
      await again.stop();
    });
  }
});

function emptyConfig(dir: string): string {
  const file = path.join(dir, 'empty.yaml');
  writeFileSync(file, stringify({ services: [] }));
  return file;
}

describe('an unusable data directory', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-baddir-'));
  const config = path.join(dir, 'mesh.yaml');
  writeFileSync(config, stringify({ services: [] }));
  after(() => rmSync(dir, { recursive: true, force: true }));

  const serve = (dataDir: string) =>
    spawnSync(
      process.execPath,
      [CLI, 'serve', '--config', config, '--data-dir', dataDir, '--xds-port', '0', '--admin-port', '0'],
      {
        encoding: 'utf8',
        timeout: 20_000,
      },
    );

  it('a data directory that is a file: the start fails naming the path and the cause', () => {
    const file = path.join(dir, 'not-a-dir');
    writeFileSync(file, 'x');
    const r = serve(file);
    assert.equal(r.status, 1, r.stdout + r.stderr);
    assert.match(r.stderr, new RegExp(`data directory ${file}`));
    assert.match(r.stderr, /not a directory/);
    assert.doesNotMatch(r.stderr, /^canopy: Database failed to open$/m);
  });

  it('a data directory on a read-only file system: the same', { skip }, () => {
    const m = mountTmpfs('1m', 'ro');
    if (typeof m === 'string') throw new Error(m);
    try {
      // A volume mounted read-only: the directory exists, nothing can be written in it.
      const r = serve(m.dir);
      assert.equal(r.status, 1, r.stdout + r.stderr);
      assert.match(r.stderr, new RegExp(`data directory ${m.dir}`));
      assert.match(r.stderr, /read-only file system/i);
    } finally {
      m.unmount();
    }
  });

  it('a data directory inside a file: the same', () => {
    const file = path.join(dir, 'plain-file');
    writeFileSync(file, 'x');
    mkdirSync(path.join(dir, 'ok'), { recursive: true });
    const r = serve(path.join(file, 'data'));
    assert.equal(r.status, 1, r.stdout + r.stderr);
    assert.match(r.stderr, new RegExp(`data directory ${path.join(file, 'data')}`));
  });
});

async function until(cond: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 100));
  }
}
