import assert from 'node:assert/strict';
import { mkdtempSync, renameSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import type { FieldError } from '../src/domain/errors.js';
import type { CanopyConfig } from '../src/domain/spec.js';
import { loadConfigFile, watchConfigFile } from '../src/store/config-file.js';

const VALID = `services:
  - name: echo
    endpoints:
      - { address: 10.0.0.1, port: 80 }
`;

function tmpFile(text: string): string {
  const file = path.join(mkdtempSync(path.join(os.tmpdir(), 'canopy-cfg-')), 'mesh.yaml');
  writeFileSync(file, text);
  return file;
}

describe('config file', () => {
  it('loads a valid file', async () => {
    const r = await loadConfigFile(tmpFile(VALID));
    assert.ok(r.ok);
    assert.equal(r.value.services[0]?.name, 'echo');
  });

  it('reports a YAML syntax error with its line', async () => {
    const r = await loadConfigFile(tmpFile('services:\n  - name: [echo\n'));
    assert.equal(r.ok, false);
    assert.match(!r.ok ? (r.errors[0]?.message ?? '') : '', /YAML syntax error at line \d+/);
  });

  it('reports a missing file', async () => {
    const r = await loadConfigFile(path.join(os.tmpdir(), 'canopy-does-not-exist.yaml'));
    assert.equal(r.ok, false);
    assert.match(!r.ok ? (r.errors[0]?.message ?? '') : '', /cannot read/);
  });

  it('watches: a valid edit applies, an invalid one is reported and never applied', async () => {
    const file = tmpFile(VALID);
    const valid: CanopyConfig[] = [];
    const invalid: (readonly FieldError[])[] = [];
    const stop = watchConfigFile(file, { onValid: (c) => valid.push(c), onInvalid: (e) => invalid.push(e) }, { debounceMs: 20 });
    try {
      await sleep(100);
      writeFileSync(file, VALID.replace('port: 80', 'port: 99999'));
      await until(() => invalid.length === 1);
      assert.equal(valid.length, 0);
      assert.equal(invalid[0]?.[0]?.path, 'services[0].endpoints[0].port');
      // Replaced, as editors do, rather than written in place.
      const next = `${file}.tmp`;
      writeFileSync(next, VALID.replace('port: 80', 'port: 81'));
      renameSync(next, file);
      await until(() => valid.length === 1);
      assert.equal(valid[0]?.services[0]?.endpoints[0]?.port, 81);
    } finally {
      stop();
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
    await sleep(20);
  }
}
