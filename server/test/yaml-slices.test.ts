/**
 * Big YAML read in slices (config/yaml-slices.ts): the same value as one
 * js-yaml parse for every layout a config is written in, and no slicing
 * (undefined: the caller parses the whole) wherever a cut could be wrong.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { load } from 'js-yaml';
import { parseConfigData } from '../src/config/config-text.js';
import { loadYamlSliced } from '../src/config/yaml-slices.js';

const flow = (i: number) => `{address: 10.0.${i >> 8}.${i & 255}, port: 80, locality: {region: r${i % 3}, zone: z1}}`;
const block = (i: number, pad: string) =>
  `${pad}- address: 10.0.${i >> 8}.${i & 255}\n${pad}  port: 80 # the app\n${pad}  locality:\n${pad}    region: r${i % 3}\n${pad}    zone: "z 1"\n`;

function oneService(n: number, entry: (i: number) => string): string {
  let s = 'server:\n  debounceMs: 20\nservices:\n  - name: big\n    endpoints:\n';
  for (let i = 0; i < n; i++) s += entry(i);
  return `${s}  - name: small\n    endpoints: []\n`;
}

function manyServices(services: number, perService: number): string {
  let s = '# mesh\nservices:\n';
  for (let k = 0; k < services; k++) {
    s += `- name: svc-${k}\n  loadBalancing: {mode: failover}\n  endpoints:\n`;
    for (let i = 0; i < perService; i++) s += `  - ${flow(k * perService + i)}\n`;
    if (k % 100 === 0) s += '\n  # a comment between services\n';
  }
  return s;
}

const sliced = (text: string): unknown => loadYamlSliced(text)?.value;

describe('YAML in slices', () => {
  it('gives what one parse gives: flow entries, block entries with comments, services × endpoints', () => {
    for (const text of [
      oneService(20_000, (i) => `      - ${flow(i)}\n`),
      oneService(12_000, (i) => block(i, '      ')),
      oneService(12_000, (i) => block(i, '    ')), // the dash at the key's indentation
      manyServices(600, 40),
    ]) {
      assert.ok(text.length > 1 << 20);
      const value = sliced(text);
      assert.notEqual(value, undefined, 'the text was cut');
      assert.deepEqual(value, load(text));
    }
  });

  it('does not cut what could be cut wrongly, and the whole parse reads it', () => {
    const quoted = oneService(20_000, (i) =>
      i === 7 ? `      - {address: "10.0.0.7, port: 80}\n` : `      - ${flow(i)}\n`,
    );
    const blockScalar = oneService(12_000, (i) =>
      i === 5 ? `      - note: |\n          - not: an entry\n` : block(i, '      '),
    );
    const alias = oneService(20_000, (i) =>
      i === 0 ? `      - &first ${flow(0)}\n` : i === 19_000 ? '      - *first\n' : `      - ${flow(i)}\n`,
    );
    assert.equal(loadYamlSliced(quoted), undefined, 'an open quote');
    assert.equal(loadYamlSliced(blockScalar), undefined, 'a block scalar');
    // An alias whose anchor is in another slice fails that slice: no cut, and the whole parse resolves it.
    assert.equal(loadYamlSliced(alias), undefined);
    const whole = parseConfigData(alias, 'yaml');
    assert.ok(whole.ok);
    assert.deepEqual(whole.value, load(alias));
    assert.equal(loadYamlSliced('services: []\n'), undefined, 'a small file is parsed whole');
  });

  it('an error in a big file is reported with its line, as one parse reports it', () => {
    const text = oneService(20_000, (i) =>
      i === 15_000 ? '      - {address: 10.9.9.9, port: 80\n' : `      - ${flow(i)}\n`,
    );
    const r = parseConfigData(text, 'yaml');
    assert.equal(r.ok, false);
    if (r.ok) return;
    assert.match(r.errors[0]!.message, /^YAML syntax error at line 1500[5-7], column \d+/);
  });
});
