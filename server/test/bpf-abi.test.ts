/**
 * bpf/canopy_abi.h and server/src/agent/abi.ts describe the same bytes:
 * compile the header with the host C compiler, print every struct's size and
 * field offsets and every constant, and compare with the TypeScript mirror.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { CONSTANTS, LAYOUT, MAX_DEPTH } from '../src/agent/abi.js';
import { SPILL_CONSTANTS, SPILL_LAYOUT } from '../src/agent/abi-spill.js';
import { SVC_LAYOUT } from '../src/agent/abi-svc.js';
import { MAX_SCOPES } from '../src/domain/locality.js';
import { packagePath } from '../src/platform/paths.js';

const cc = ['cc', 'gcc', 'clang'].find((c) => spawnSync(c, ['--version'], { stdio: 'ignore' }).status === 0);

describe(
  'BPF ABI: header and TypeScript mirror',
  { skip: cc ? false : 'no C compiler (cc, gcc or clang) to compile the header' },
  () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-abi-'));
    const exe = path.join(dir, 'abi-layout');
    const build = spawnSync(
      cc!,
      ['-Wall', '-Werror', '-I', packagePath('bpf'), '-o', exe, packagePath('bpf', 'abi-layout.c')],
      { encoding: 'utf8' },
    );
    const printed = build.status === 0 ? spawnSync(exe, { encoding: 'utf8' }).stdout : '';

    it('the header compiles', () => {
      assert.equal(build.status, 0, build.stderr);
    });

    it('every struct has the same size and field offsets', () => {
      const c = JSON.parse(printed) as { layout: Record<string, { size: number; fields: Record<string, number> }> };
      assert.deepEqual(c.layout, { ...LAYOUT, ...SVC_LAYOUT, ...SPILL_LAYOUT });
    });

    it('every constant has the same value', () => {
      const c = JSON.parse(printed) as { constants: Record<string, number> };
      assert.deepEqual(c.constants, { ...CONSTANTS, ...SPILL_CONSTANTS });
    });

    it('the kernel walks as many levels as the server allows scopes', () => {
      assert.equal(MAX_DEPTH, MAX_SCOPES);
    });
  },
);
