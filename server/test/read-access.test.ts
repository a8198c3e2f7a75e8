import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseReadRules, ReadAccess, type ReadRules } from '../src/transport/read-access.js';

const rules: ReadRules = {
  rules: [
    { spiffe: 'spiffe://tenant-a.test/ns/a/**', services: ['a-*', 'shared'] },
    { spiffe: 'spiffe://tenant-b.test/ns/*/sa/web', services: ['b-*'], csds: true },
  ],
};

describe('read rules', () => {
  it('grants the union of the rules an identity matches; no match reads nothing', () => {
    const access = new ReadAccess(rules);
    const cases: [string, string, boolean][] = [
      ['spiffe://tenant-a.test/ns/a/sa/web', 'a-web', true],
      ['spiffe://tenant-a.test/ns/a/sa/web', 'shared', true],
      ['spiffe://tenant-a.test/ns/a/sa/web', 'b-web', false],
      ['spiffe://tenant-a.test/ns/a', 'a-web', true],
      ['spiffe://tenant-a.test/ns/ab/x', 'a-web', false],
      ['spiffe://tenant-a.test.evil/ns/a/x', 'a-web', false],
      ['spiffe://tenant-b.test/ns/b/sa/web', 'b-web', true],
      ['spiffe://tenant-b.test/ns/b/c/sa/web', 'b-web', false],
      ['spiffe://other.test/ns/a/sa/web', 'a-web', false],
    ];
    for (const [id, service, ok] of cases) assert.equal(access.grant([id]).service(service), ok, `${id} ${service}`);
    assert.equal(access.grant(['spiffe://tenant-b.test/ns/x/sa/web']).csds, true);
    assert.equal(access.grant(['spiffe://tenant-a.test/ns/a/sa/web']).csds, false);
    assert.equal(new ReadAccess().grant([]).all, true, 'no rules: everything');
  });

  it('reports every problem with its field path', () => {
    const r = parseReadRules({
      rules: [
        { spiffe: 'spiffe://*.test/ns', services: ['a b'] },
        { spiffe: 'https://x.test/a', services: [], extra: 1 },
        { services: ['x'] },
      ],
    });
    assert.ok(!r.ok);
    const paths = r.errors.map((e) => `${e.path}: ${e.message}`);
    assert.ok(
      paths.some((p) => p.startsWith('rules[0].spiffe: must be spiffe://')),
      paths.join('\n'),
    );
    assert.ok(paths.some((p) => p.startsWith('rules[0].services[0]: must be a service name pattern')));
    assert.ok(paths.some((p) => p.startsWith('rules[1].spiffe:')));
    assert.ok(paths.includes('rules[1].extra: unknown field'));
    assert.ok(paths.includes('rules[2].spiffe: is required'));
    assert.ok(parseReadRules(rules).ok);
  });
});
