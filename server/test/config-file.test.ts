/** The config file on real temp files: load, YAML errors, and the watch. */
import assert from 'node:assert/strict';
import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import type { FieldError } from '../src/domain/errors.js';
import type { CanopyConfig } from '../src/domain/spec.js';
import { loadConfigFile, watchConfigFile } from '../src/store/config-file.js';

const VALID = `server:
  adminPort: 0
services:
  - name: echo
    endpoints:
      - { address: 10.0.0.1, port: 80, locality: { region: r1 } }
`;

const dirs: string[] = [];
after(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function tmpFile(text: string, name = 'mesh.yaml'): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-cfg-'));
  dirs.push(dir);
  const file = path.join(dir, name);
  writeFileSync(file, text);
  return file;
}

function messagesOf(r: { ok: boolean; errors?: readonly FieldError[] }): string[] {
  assert.equal(r.ok, false, 'expected the load to fail');
  return (r.errors ?? []).map((e) => `${e.path}|${e.message}`);
}

describe('loadConfigFile', () => {
  it('loads a valid file', async () => {
    const r = await loadConfigFile(tmpFile(VALID));
    assert.ok(r.ok);
    assert.deepEqual(r.value.server, { adminPort: 0 });
    assert.equal(r.value.services[0]?.name, 'echo');
    assert.equal(r.value.services[0]?.endpoints[0]?.locality.region, 'r1');
  });

  // [case, file text, expected "path|message" prefix of the first error]
  const invalid: [string, string, string][] = [
    [
      'a tab as indentation',
      'services:\n\t- name: x\n',
      '|YAML syntax error at line 2, column 1: tab characters must not be used in indentation',
    ],
    [
      'a duplicate key',
      'services:\n  - name: a\n    port: 80\n    port: 81\n',
      '|YAML syntax error at line 4, column 5: duplicated mapping key',
    ],
    ['an unclosed quote', 'services:\n  - name: a\n    vip: "10.0.0.1\n', '|YAML syntax error at line 4'],
    ['an alias to no anchor', 'services: *nothing\n', '|YAML syntax error at line 1, column 12: unidentified alias'],
    ['two documents', 'services: []\n---\nservices: []\n', '|YAML error: expected one document, found 2'],
    ['a comment only', '# nothing yet\n', 'services|must be a list of services, got nothing'],
    ['an empty file', '', 'services|must be a list of services, got nothing'],
    [
      'a bad field',
      VALID.replace('port: 80', 'port: 0'),
      'services[0].endpoints[0].port|must be an integer from 1 to 65535',
    ],
  ];
  for (const [what, text, want] of invalid) {
    it(`reports ${what}`, async () => {
      const messages = messagesOf(await loadConfigFile(tmpFile(text)));
      assert.ok(messages[0]?.startsWith(want), `${JSON.stringify(messages)} should start with ${JSON.stringify(want)}`);
    });
  }

  it('reads a .json file as JSON, with the same validation', async () => {
    const json = {
      server: { adminPort: 0 },
      services: [{ name: 'echo', endpoints: [{ address: '10.0.0.1', port: 80, locality: { region: 'r1' } }] }],
    };
    const r = await loadConfigFile(tmpFile(JSON.stringify(json), 'mesh.json'));
    assert.ok(r.ok);
    assert.equal(r.value.services[0]?.endpoints[0]?.locality.region, 'r1');
    json.services[0]!.endpoints[0]!.port = 0;
    assert.match(
      messagesOf(await loadConfigFile(tmpFile(JSON.stringify(json), 'mesh.json')))[0] ?? '',
      /^services\[0\]\.endpoints\[0\]\.port\|must be an integer from 1 to 65535/,
    );
  });

  it('reports a JSON syntax error with its line and column', async () => {
    const messages = messagesOf(
      await loadConfigFile(tmpFile('{\n  "services": [\n    { "name": "a", }\n  ]\n}\n', 'm.json')),
    );
    assert.match(messages[0] ?? '', /^\|JSON syntax error at line 3, column 20: Expected double-quoted property name$/);
  });

  it('reports a missing file', async () => {
    const missing = path.join(path.dirname(tmpFile('')), 'absent.yaml');
    assert.match(messagesOf(await loadConfigFile(missing))[0] ?? '', /^\|cannot read .*absent\.yaml/);
  });
});

describe('watchConfigFile', () => {
  function watching(file: string) {
    const valid: CanopyConfig[] = [];
    const invalid: (readonly FieldError[])[] = [];
    const stop = watchConfigFile(
      file,
      { onValid: (c) => valid.push(c), onInvalid: (e) => invalid.push(e) },
      { debounceMs: 20 },
    );
    return { valid, invalid, stop };
  }

  it('applies a valid edit and reports an invalid one without applying it', async () => {
    const file = tmpFile(VALID);
    const w = watching(file);
    try {
      writeFileSync(file, VALID.replace('port: 80', 'port: 99999'));
      await until(() => w.invalid.length === 1);
      assert.equal(w.valid.length, 0, 'an invalid edit never reaches onValid');
      assert.deepEqual(
        w.invalid[0]?.map((e) => e.path),
        ['services[0].endpoints[0].port'],
      );

      // Replaced, as editors do, rather than written in place.
      const next = `${file}.tmp`;
      writeFileSync(next, VALID.replace('port: 80', 'port: 81'));
      renameSync(next, file);
      await until(() => w.valid.length === 1);
      assert.equal(w.valid[0]?.services[0]?.endpoints[0]?.port, 81);
      assert.equal(w.invalid.length, 1);
    } finally {
      w.stop();
    }
  });

  it('ignores rewrites without a change, other files, and everything after stop()', async () => {
    const file = tmpFile(VALID);
    const w = watching(file);
    writeFileSync(file, VALID);
    writeFileSync(path.join(path.dirname(file), 'other.yaml'), 'not: [valid');
    await sleep(150);
    assert.deepEqual([w.valid.length, w.invalid.length], [0, 0]);
    w.stop();
    writeFileSync(file, VALID.replace('port: 80', 'port: 82'));
    await sleep(150);
    assert.deepEqual([w.valid.length, w.invalid.length], [0, 0]);
  });

  it('reports a YAML syntax error in an edit', async () => {
    const file = tmpFile(VALID);
    const w = watching(file);
    try {
      writeFileSync(file, `${VALID}\t- oops\n`);
      await until(() => w.invalid.length === 1);
      assert.match(w.invalid[0]?.[0]?.message ?? '', /^YAML syntax error at line 7/);
      assert.equal(w.valid.length, 0);
    } finally {
      w.stop();
    }
  });
});

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

async function until(cond: () => boolean, timeoutMs = 5000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await sleep(10);
  }
}
