/**
 * docs/configuration.md is the full reference: every property of the JSON Schema `canopy schema` prints
 * (through `properties`, `items`, `$ref` and the `anyOf`/`oneOf`/`allOf` branches) appears at its place
 * in the page's YAML reference, as a key under the same parents (`services[].dns.lookupFamily`).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { load } from 'js-yaml';
import { packagePath } from '../src/platform/paths.js';

type Node = Record<string, unknown>;

/** Every property path of a schema: `a.b`, an array's items as `a[]`. */
function schemaPaths(schema: Node): string[] {
  const defs = (schema['definitions'] ?? {}) as Record<string, Node>;
  const out = new Set<string>();
  const walk = (node: unknown, at: string, refs: ReadonlySet<string>): void => {
    if (typeof node !== 'object' || node === null) return;
    const n = node as Node;
    const ref = typeof n['$ref'] === 'string' ? n['$ref'].split('/').at(-1)! : undefined;
    if (ref !== undefined && !refs.has(ref)) walk(defs[ref], at, new Set([...refs, ref]));
    for (const [k, v] of Object.entries((n['properties'] ?? {}) as Node)) {
      const p = at ? `${at}.${k}` : k;
      out.add(p);
      walk(v, p, refs);
    }
    if (typeof n['items'] === 'object') walk(n['items'], `${at}[]`, refs);
    for (const key of ['anyOf', 'oneOf', 'allOf'])
      for (const branch of (n[key] ?? []) as unknown[]) walk(branch, at, refs);
  };
  walk(schema, '', new Set());
  return [...out];
}

/** Every key path of a parsed YAML document, in the same notation. */
function documentPaths(doc: unknown, at = '', out = new Set<string>()): Set<string> {
  if (Array.isArray(doc)) for (const x of doc) documentPaths(x, `${at}[]`, out);
  else if (typeof doc === 'object' && doc !== null)
    for (const [k, v] of Object.entries(doc)) {
      const p = at ? `${at}.${k}` : k;
      out.add(p);
      documentPaths(v, p, out);
    }
  return out;
}

describe('docs/configuration.md, the full reference', () => {
  const cli = packagePath('dist', 'server', 'src', 'cli', 'canopy.js');
  const run = spawnSync(process.execPath, [cli, 'schema'], { encoding: 'utf8' });
  const page = readFileSync(packagePath('docs', 'configuration.md'), 'utf8');
  const documented = new Set<string>();
  for (const m of page.matchAll(/```yaml\n([\s\S]*?)```/g)) {
    const doc = load(m[1]!);
    if (typeof doc === 'object' && doc !== null && ('services' in doc || 'server' in doc))
      documentPaths(doc, '', documented);
  }

  it('documents every property of the schema canopy schema prints, under its parents', () => {
    assert.equal(run.status, 0, run.stderr);
    const paths = schemaPaths(JSON.parse(run.stdout) as Node);
    assert.ok(paths.length > 50, `the schema's properties (${paths.length})`);
    assert.deepEqual(
      paths.filter((p) => !documented.has(p)),
      [],
      'schema properties missing from the YAML reference',
    );
  });

  it('says an endpoint address may be a DNS name, not only an IP literal', () => {
    assert.match(page, /address: [^\n]*IPv4 or IPv6 literal, or a DNS hostname/);
  });
});
