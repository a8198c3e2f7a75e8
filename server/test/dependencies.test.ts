/**
 * What a production install pulls: every package the server's code imports is a dependency, every
 * dependency is imported by it (a test-only package stays in devDependencies), one YAML parser, and
 * a package name the project can publish under that still installs the `canopy` command.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { builtinModules } from 'node:module';
import path from 'node:path';
import { describe, it } from 'node:test';
import { packagePath } from '../src/platform/paths.js';

const pkg = JSON.parse(readFileSync(packagePath('package.json'), 'utf8')) as {
  name: string;
  bin: Record<string, string>;
  dependencies: Record<string, string>;
  devDependencies: Record<string, string>;
};

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sources(path.join(dir, e.name)) : e.name.endsWith('.ts') ? [path.join(dir, e.name)] : [],
  );
}

/** The package a bare specifier names: `@scope/name/sub` → `@scope/name`, `name/sub` → `name`. */
function packageOf(spec: string): string {
  const parts = spec.split('/');
  return spec.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0]!;
}

/** Every package imported (statically, dynamically or as a type) by the shipped code, with one file each. */
function importedPackages(): Map<string, string> {
  const out = new Map<string, string>();
  for (const file of sources(packagePath('server', 'src'))) {
    const text = readFileSync(file, 'utf8');
    const specs = [
      ...text.matchAll(/^\s*(?:import|export)\b[^;']*?\bfrom\s+'([^']+)'/gm),
      ...text.matchAll(/^\s*import\s+'([^']+)'/gm),
      ...text.matchAll(/\bimport\(\s*'([^']+)'\s*\)/g),
    ].map((m) => m[1]!);
    for (const spec of specs) {
      if (spec.startsWith('.')) continue;
      if (spec.startsWith('node:') || builtinModules.includes(spec)) continue;
      out.set(packageOf(spec), path.relative(packagePath(), file));
    }
  }
  return out;
}

describe('dependencies', () => {
  const imported = importedPackages();

  it('every package the server imports is a production dependency', () => {
    const missing = [...imported].filter(([p]) => !(p in pkg.dependencies)).map(([p, f]) => `${p} (${f})`);
    assert.deepEqual(missing, []);
  });

  it('every production dependency is used by the server (test-only packages are devDependencies)', () => {
    // @types/node-free: a dependency used only by build scripts would show here too.
    const unused = Object.keys(pkg.dependencies).filter((p) => !imported.has(p));
    assert.deepEqual(unused, []);
    for (const testOnly of ['playwright-core', 'fast-check', 'typescript', 'eslint', 'prettier'])
      assert.ok(!(testOnly in pkg.dependencies), `${testOnly} is not a production dependency`);
  });

  it('one YAML parser: js-yaml (its loadAll reads multi-document files)', () => {
    assert.ok('js-yaml' in pkg.dependencies);
    assert.ok(!('yaml' in pkg.dependencies) && !('yaml' in pkg.devDependencies));
    assert.ok(!imported.has('yaml'));
  });

  it('a name the project can publish under, still installing the `canopy` command', () => {
    assert.notEqual(pkg.name, 'canopy', 'the npm name canopy belongs to an unrelated package');
    assert.equal(pkg.bin['canopy'], 'dist/server/src/cli/canopy.js');
  });
});
