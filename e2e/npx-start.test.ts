/**
 * The first command a newcomer types in a clone, `npx canopy --version`, answers in seconds: npm links
 * the clone into a fresh npx cache and runs its `prepare` script, which finds dist/ newer than every
 * source and skips the build (it took 48 s when prepare rebuilt everything). The build's outputs are
 * left untouched, and the version printed is the package's.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { packagePath } from '../server/src/platform/paths.js';

describe('npx canopy from a clone', () => {
  it('answers --version without rebuilding dist/', (t) => {
    const probe = spawnSync('npx', ['--version'], { encoding: 'utf8' });
    if (probe.error) {
      if (process.env['CI'] === 'true') assert.fail('npx is missing in CI');
      return t.skip('npx is not installed');
    }
    // A stale dist/ (a partial build) would be rebuilt under the other tests' feet: not here.
    if (spawnSync(process.execPath, [packagePath('server', 'prepare.mjs'), '--check']).status !== 0)
      return t.skip('dist/ is older than the sources: npm run build first');
    const cache = mkdtempSync(path.join(os.tmpdir(), 'canopy-npx-cache-'));
    const built = packagePath('dist', 'server', 'src', 'cli', 'canopy.js');
    const before = statSync(built).mtimeMs;
    try {
      const started = Date.now();
      const r = spawnSync('npx', ['--yes', 'canopy', '--version'], {
        cwd: packagePath(),
        encoding: 'utf8',
        timeout: 60_000,
        // A fresh npx cache, as in a new clone; offline: linking the clone needs no registry.
        env: {
          ...process.env,
          npm_config_cache: cache,
          npm_config_offline: 'true',
          npm_config_update_notifier: 'false',
        },
      });
      const seconds = (Date.now() - started) / 1000;
      assert.equal(r.status, 0, r.stderr);
      const pkg = JSON.parse(readFileSync(packagePath('package.json'), 'utf8')) as { version: string };
      assert.equal(r.stdout.trim(), pkg.version);
      assert.equal(statSync(built).mtimeMs, before, 'prepare did not rebuild dist/');
      t.diagnostic(`npx canopy --version with a fresh npx cache: ${seconds.toFixed(1)} s`);
      assert.ok(seconds < 30, `took ${seconds} s`);
    } finally {
      rmSync(cache, { recursive: true, force: true });
    }
  });
});
