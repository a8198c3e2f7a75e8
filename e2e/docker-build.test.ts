/**
 * The compose demo's images build: each Dockerfile's stages replayed without
 * a Docker engine (e2e/support/dockerfile-replay.ts says what is stood in
 * for: `npm ci` links the installed node_modules instead of downloading it,
 * `npm prune` and `apt-get` are not run). Its COPY set lands in an empty
 * directory and its RUN steps run there, so a file the build needs and the
 * Dockerfile does not copy fails here as it fails `docker build`. Then the
 * final stage's layout runs its entry point: the control plane serves until
 * ready, the agent prints its help. What the image runs imports only
 * packages `npm prune --omit=dev` keeps.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { packagePath } from '../server/src/platform/paths.js';
import { replayDockerfile, type Replay } from './support/dockerfile-replay.js';

const root = packagePath();
const installed = realpathSync(path.join(root, 'node_modules'));
const pkg = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as {
  dependencies: Record<string, string>;
};

function jsFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? jsFiles(path.join(dir, e.name)) : e.name.endsWith('.js') ? [path.join(dir, e.name)] : [],
  );
}

/** Bare package imports of the built code that are not runtime dependencies. */
function devOnlyImports(dist: string): string[] {
  const out = new Set<string>();
  for (const f of jsFiles(dist)) {
    const text = readFileSync(f, 'utf8');
    const specs = [
      ...text.matchAll(/^(?:import|export)\b[^;]*?\bfrom\s*['"]([^'"]+)['"]/gm),
      ...text.matchAll(/^import\s*['"]([^'"]+)['"]/gm),
      ...text.matchAll(/\bimport\(\s*['"]([^'"]+)['"]\s*\)/g),
    ].map((m) => m[1]!);
    for (const spec of specs) {
      if (spec.startsWith('.') || spec.startsWith('/') || spec.startsWith('node:')) continue;
      const name = spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0]!;
      if (!(name in pkg.dependencies)) out.add(`${path.relative(dist, f)}: ${name}`);
    }
  }
  return [...out];
}

/** The final stage's entry point until "canopy ready", then SIGTERM. */
async function serveUntilReady(replay: Replay, config: string): Promise<string> {
  const [bin, ...args] = replay.final.entrypoint;
  assert.equal(bin, 'node');
  const data = path.join(replay.final.dir, 'data');
  const child = spawn(
    process.execPath,
    [
      ...args,
      'serve',
      '--config',
      config,
      '--host',
      '127.0.0.1',
      '--xds-port',
      '0',
      '--admin-port',
      '0',
      '--data-dir',
      data,
    ],
    { cwd: replay.final.dir, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  try {
    return await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`not ready:\n${out}`)), 20_000);
      const take = (c: Buffer) => {
        out += c.toString();
        if (out.includes('"canopy ready"')) {
          clearTimeout(timer);
          resolve(out);
        }
      };
      child.stdout.on('data', take);
      child.stderr.on('data', take);
      child.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`exited ${code}:\n${out}`));
      });
    });
  } finally {
    child.kill('SIGTERM');
  }
}

describe('the compose images build (Dockerfile stages replayed)', () => {
  const replays: Replay[] = [];
  after(() => {
    for (const r of replays) r.cleanup();
  });

  it('server/Dockerfile: builds only what runs, and its image serves the compose config', async () => {
    const r = replayDockerfile(path.join(root, 'server', 'Dockerfile'), root, installed);
    replays.push(r);
    const build = r.dirs.get('build')!;
    assert.equal(existsSync(path.join(build, 'e2e')), false, 'the tests are not copied in');
    assert.equal(existsSync(path.join(build, 'dist', 'server', 'test')), false, 'nor built');
    assert.ok(existsSync(path.join(r.final.dir, 'dist', 'ui', 'app.js')), 'the web view is bundled');
    assert.deepEqual(
      devOnlyImports(path.join(r.final.dir, 'dist', 'server')),
      [],
      'runtime code needs only dependencies',
    );
    assert.ok(
      r.notes.some((n) => n.includes('npm ci')),
      r.notes.join('\n'),
    );
    const out = await serveUntilReady(r, path.join(root, 'deploy', 'compose', 'mesh.yaml'));
    assert.match(out, /"canopy ready"/);
  });

  it('bpf/Dockerfile: builds the BPF object and the addon, and its entry point runs', (t) => {
    const missing = ['clang', 'make', 'g++'].filter(
      (c) => spawnSync(c, ['--version'], { stdio: 'ignore' }).status !== 0,
    );
    if (os.platform() !== 'linux' || missing.length > 0 || !existsSync('/usr/include/bpf/bpf_helpers.h')) {
      t.skip(`the BPF toolchain is missing (${[...missing, 'libbpf-dev headers'].join(', ')}); CI installs it`);
      return;
    }
    const r = replayDockerfile(path.join(root, 'bpf', 'Dockerfile'), root, installed);
    replays.push(r);
    for (const f of ['bpf/build/canopy.bpf.o', 'bpf/build/Release/canopy_bpf.node'])
      assert.ok(existsSync(path.join(r.final.dir, f)), f);
    assert.deepEqual(devOnlyImports(path.join(r.final.dir, 'dist', 'server')), []);
    const [bin, ...args] = r.final.entrypoint;
    assert.equal(bin, 'node');
    const help = spawnSync(process.execPath, [...args, '--help'], {
      cwd: r.final.dir,
      encoding: 'utf8',
      timeout: 20_000,
    });
    assert.equal(help.status, 0, help.stderr);
    assert.match(help.stdout, /canopy agent uninstall/);
  });

  it('a file the build needs and the Dockerfile does not copy fails the replay', () => {
    // The sources left out: the build step fails as it would in `docker build` (fast: tsc finds no inputs).
    const text = readFileSync(path.join(root, 'server', 'Dockerfile'), 'utf8').replace(/^COPY server \.\/server$/m, '');
    const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-dockerfile-'));
    const file = path.join(dir, 'Dockerfile');
    writeFileSync(file, text);
    try {
      assert.throws(() => replayDockerfile(file, root, installed).cleanup(), /RUN npm run build:prod && npm prune/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
