/**
 * The published JSON Schema for mesh.yaml (server/schema/mesh.schema.json) says what the server's
 * validator says: every example the project ships (and the README's and the configuration page's)
 * passes both, and every invalid fixture is rejected by both at the same field path, except the
 * cross-field rules marked server-only. Every shipped example names the schema for editors.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { Ajv, type ErrorObject } from 'ajv';
import { load, loadAll } from 'js-yaml';
import { parseConfig } from '../src/domain/spec.js';
import { packagePath } from '../src/platform/paths.js';

const SCHEMA_PATH = packagePath('server', 'schema', 'mesh.schema.json');
const schema = JSON.parse(readFileSync(SCHEMA_PATH, 'utf8')) as object;
const validate = new Ajv({ allErrors: true, strict: true }).compile(schema);

/** Example files: they carry the yaml-language-server comment. */
const EXAMPLES = ['server/examples/mesh.yaml', 'deploy/compose/mesh.yaml'];

/** Config blocks inside Markdown pages a user copies from. */
function markdownConfigs(page: string): string[] {
  const text = readFileSync(packagePath(page), 'utf8');
  return [...text.matchAll(/```yaml\n([\s\S]*?)```/g)].map((m) => m[1]!).filter((b) => /^services:/m.test(b));
}

/** ajv's /services/0/endpoints/0/address as the server writes it: services[0].endpoints[0].address. */
function fieldPath(e: ErrorObject): string {
  const parts = e.instancePath.split('/').slice(1);
  if (e.keyword === 'additionalProperties') parts.push(String(e.params['additionalProperty']));
  if (e.keyword === 'required') parts.push(String(e.params['missingProperty']));
  return parts.reduce((p, s) => (/^\d+$/.test(s) ? `${p}[${s}]` : p ? `${p}.${s}` : s), '');
}

describe('mesh.yaml JSON Schema', () => {
  it('is a valid draft-07 schema that ajv compiles in strict mode', () => assert.equal(typeof validate, 'function'));

  const valid: [string, unknown][] = [
    ...EXAMPLES.map((f): [string, unknown] => [f, load(readFileSync(packagePath(f), 'utf8'))]),
    ...['README.md', 'docs/configuration.md'].flatMap((page) =>
      markdownConfigs(page).map((b, i): [string, unknown] => [`${page} block ${i}`, load(b)]),
    ),
  ];
  it('there are examples from the files, the README and the configuration page', () => assert.ok(valid.length >= 4));
  for (const [name, doc] of valid) {
    it(`${name}: the server and the schema both accept it`, () => {
      const server = parseConfig(doc);
      assert.ok(server.ok, JSON.stringify(!server.ok && server.errors));
      assert.ok(validate(doc), JSON.stringify(validate.errors));
    });
  }

  const fixtures = loadAll(readFileSync(packagePath('server', 'test', 'fixtures', 'invalid-configs.yaml'), 'utf8')) as {
    expect: string;
    schema?: 'server-only';
    doc: unknown;
  }[];
  for (const f of fixtures) {
    it(`invalid at ${f.expect}: the server${f.schema === 'server-only' ? '' : ' and the schema'} reject it there`, () => {
      const server = parseConfig(f.doc);
      assert.ok(!server.ok, 'the server rejects it');
      assert.ok(
        server.errors.some((e) => e.path === f.expect),
        `server paths: ${server.errors.map((e) => e.path).join(', ')}`,
      );
      const ok = validate(f.doc);
      if (f.schema === 'server-only') return;
      assert.equal(ok, false, 'the schema rejects it');
      const paths = (validate.errors ?? []).map(fieldPath);
      assert.ok(paths.includes(f.expect), `schema paths: ${paths.join(', ')}`);
    });
  }

  it('every example names the schema for editors (yaml-language-server), by a path that resolves', () => {
    for (const f of EXAMPLES) {
      const first = readFileSync(packagePath(f), 'utf8').split('\n')[0]!;
      const m = /^# yaml-language-server: \$schema=(\S+)$/.exec(first);
      assert.ok(m, `${f} starts with the yaml-language-server comment`);
      assert.equal(path.resolve(path.dirname(packagePath(f)), m[1]!), SCHEMA_PATH);
    }
  });
});
