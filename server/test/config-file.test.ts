/** The config file on real temp files: load, YAML errors, and the watch. */
import assert from 'node:assert/strict';
import {
  closeSync,
  fsyncSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import type { FieldError } from '../src/domain/errors.js';
import type { CanopyConfig } from '../src/domain/spec.js';
import {
  loadConfigFile,
  OFF_THREAD_BYTES,
  parseConfigText,
  parseConfigTextOffThread,
} from '../src/config/config-file.js';
import { watchConfigFile } from '../src/config/config-watch.js';
import { contentDigest } from '../src/config/config-text.js';

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
      { settleMs: 20, pollMs: 50 },
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

  it('a neighbour written without pause does not hold an edit back; the file itself rewritten is read within the bound', async () => {
    const file = tmpFile(VALID);
    const valid: [CanopyConfig, number][] = [];
    const stop = watchConfigFile(
      file,
      { onValid: (c, _d, waited) => valid.push([c, waited]), onInvalid: () => {} },
      { settleMs: 200, maxWaitMs: 600, pollMs: 50 },
    );
    const neighbour = path.join(path.dirname(file), 'app.log');
    let n = 0;
    const writer = setInterval(() => writeFileSync(neighbour, `line ${n++}\n`), 40);
    try {
      const edited = Date.now();
      writeFileSync(file, VALID.replace('port: 80', 'port: 83'));
      await until(() => valid.length === 1, 3000);
      assert.equal(valid[0]?.[0].services[0]?.endpoints[0]?.port, 83);
      // Without the neighbour it is one settle time; the directory-wide watch never applied it while the log grew.
      assert.ok(Date.now() - edited < 550, `applied ${Date.now() - edited} ms after the edit`);
      // The config itself rewritten every 40 ms: never quiet, read anyway once the bound passes.
      let port = 84;
      const rewriter = setInterval(() => writeFileSync(file, VALID.replace('port: 80', `port: ${port++}`)), 40);
      try {
        await until(() => valid.length === 2, 3000);
        const waited = valid[1]?.[1] ?? 0;
        assert.ok(waited >= 550 && waited < 1500, `read ${waited} ms after the first change (bound 600)`);
      } finally {
        clearInterval(rewriter);
      }
    } finally {
      clearInterval(writer);
      stop();
    }
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

describe('watchConfigFile: reading safely', () => {
  const manyEndpoints = (port: number) =>
    `services:\n  - name: big\n    endpoints:\n${Array.from(
      { length: 20 },
      (_, i) => `      - { address: 10.0.1.${i + 1}, port: ${port}, locality: { region: r1 } }\n`,
    ).join('')}  - name: other\n    endpoints:\n      - { address: 10.0.2.1, port: 80 }\n`;

  it('waits for a file written in two steps to settle: the valid-looking first 30% is never applied', async () => {
    const file = tmpFile(manyEndpoints(80));
    const valid: CanopyConfig[] = [];
    const invalid: (readonly FieldError[])[] = [];
    // The default settle time, as `canopy serve` runs it.
    const stop = watchConfigFile(file, { onValid: (c) => valid.push(c), onInvalid: (e) => invalid.push(e) });
    try {
      const text = manyEndpoints(81);
      // Cut at a line end near 30%: a valid YAML document with 6 of 20 endpoints and no "other".
      const cut = text.indexOf('\n', Math.floor(text.length * 0.3)) + 1;
      const partial = await parseConfigText(text.slice(0, cut));
      assert.ok(partial.ok && partial.value.services.length === 1, 'the half is itself a valid config');
      const fd = openSync(file, 'w');
      writeSync(fd, text.slice(0, cut));
      fsyncSync(fd);
      await sleep(400);
      writeSync(fd, text.slice(cut));
      closeSync(fd);
      await until(() => valid.length === 1);
      await sleep(1200);
      assert.equal(valid.length, 1, 'applied once, whole');
      assert.deepEqual(
        valid[0]?.services.map((s) => [s.name, s.endpoints.length, s.endpoints[0]?.port]),
        [
          ['big', 20, 81],
          ['other', 1, 80],
        ],
      );
      assert.equal(invalid.length, 0);
    } finally {
      stop();
    }
  });

  it('starts from the content the caller runs: an edit made after its read counts, the same bytes do not', async () => {
    const file = tmpFile(VALID);
    const startedWith = contentDigest(Buffer.from(VALID));
    // The same content: nothing to apply.
    const same: CanopyConfig[] = [];
    const stopSame = watchConfigFile(
      file,
      { onValid: (c) => same.push(c), onInvalid: () => {} },
      { settleMs: 20, pollMs: 50, initialDigest: startedWith },
    );
    await sleep(300);
    stopSame();
    assert.equal(same.length, 0, 'unchanged content is not applied again');
    // Edited between the caller's read and the watch: applied once, with the digest of what was parsed.
    const edited = VALID.replace('port: 80', 'port: 88');
    writeFileSync(file, edited);
    const valid: [CanopyConfig, string][] = [];
    const stop = watchConfigFile(
      file,
      { onValid: (c, d) => valid.push([c, d]), onInvalid: () => {} },
      { settleMs: 20, pollMs: 50, initialDigest: startedWith },
    );
    try {
      await until(() => valid.length === 1);
      assert.equal(valid[0]?.[0].services[0]?.endpoints[0]?.port, 88);
      assert.equal(valid[0]?.[1], contentDigest(Buffer.from(edited)));
    } finally {
      stop();
    }
  });

  it('applies a Kubernetes ConfigMap update (the ..data symlink swapped)', async () => {
    const dir = path.dirname(tmpFile(''));
    const version = (n: number) => {
      mkdirSync(path.join(dir, `..v${n}`));
      writeFileSync(path.join(dir, `..v${n}`, 'cm.yaml'), VALID.replace('port: 80', `port: ${80 + n}`));
    };
    version(1);
    symlinkSync('..v1', path.join(dir, '..data'));
    symlinkSync('..data/cm.yaml', path.join(dir, 'cm.yaml'));
    const valid: CanopyConfig[] = [];
    const stop = watchConfigFile(
      path.join(dir, 'cm.yaml'),
      { onValid: (c) => valid.push(c), onInvalid: () => {} },
      { settleMs: 20, pollMs: 50 },
    );
    try {
      // What the kubelet does: a new timestamped directory, a new link, renamed over ..data.
      version(2);
      symlinkSync('..v2', path.join(dir, '..data_tmp'));
      renameSync(path.join(dir, '..data_tmp'), path.join(dir, '..data'));
      rmSync(path.join(dir, '..v1'), { recursive: true });
      await until(() => valid.length === 1);
      assert.equal(valid[0]?.services[0]?.endpoints[0]?.port, 82);
    } finally {
      stop();
    }
  });

  it('follows a config directory that is replaced, and edits in the new one', async () => {
    const base = path.dirname(tmpFile(''));
    const conf = path.join(base, 'conf');
    mkdirSync(conf);
    writeFileSync(path.join(conf, 'mesh.yaml'), VALID);
    const valid: CanopyConfig[] = [];
    const stop = watchConfigFile(
      path.join(conf, 'mesh.yaml'),
      { onValid: (c) => valid.push(c), onInvalid: () => {} },
      { settleMs: 20, pollMs: 50 },
    );
    try {
      const next = path.join(base, 'conf.new');
      mkdirSync(next);
      writeFileSync(path.join(next, 'mesh.yaml'), VALID.replace('port: 80', 'port: 91'));
      renameSync(conf, path.join(base, 'conf.old'));
      renameSync(next, conf);
      await until(() => valid.length === 1);
      assert.equal(valid[0]?.services[0]?.endpoints[0]?.port, 91);
      writeFileSync(path.join(conf, 'mesh.yaml'), VALID.replace('port: 80', 'port: 92'));
      await until(() => valid.length === 2);
      assert.equal(valid[1]?.services[0]?.endpoints[0]?.port, 92);
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
    await sleep(10);
  }
}

describe('parsing off the event loop', () => {
  /** A YAML config over the off-thread threshold. */
  const big = (bad = false): string => {
    const lines = ['services:', '  - name: big', '    endpoints:'];
    for (let i = 0; lines.join('\n').length < OFF_THREAD_BYTES * 1.2; i++) {
      lines.push(
        `      - { address: 10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}, port: 80, locality: { region: r${i % 3} } }`,
      );
    }
    if (bad) lines.push('      - { address: 10.255.0.1, port: 99999 }');
    return `${lines.join('\n')}\n`;
  };

  it('gives the same config as the inline parse, from a worker thread', async () => {
    const text = big();
    const inline = await parseConfigText(text, 'mesh.yaml');
    const off = await parseConfigTextOffThread(text, 'mesh.yaml');
    assert.ok(inline.ok && off.ok);
    assert.deepEqual(off, inline);
  });

  it('gives the same errors, with their field paths', async () => {
    const text = big(true);
    const inline = await parseConfigText(text, 'mesh.yaml');
    const off = await parseConfigTextOffThread(text, 'mesh.yaml');
    assert.equal(off.ok, false);
    assert.deepEqual(off, inline);
    assert.match(JSON.stringify(off), /services\[0\]\.endpoints\[\d+\]\.port/);
  });
});
