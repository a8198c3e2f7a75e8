#!/usr/bin/env node
// Builds the kernel datapath: the BPF object (clang -target bpf) and the N-API
// addon over the system libbpf (node-gyp). Both land in bpf/build/.
// `node bpf/build.mjs --if-possible` prints why and exits 0 when a tool is
// missing (a laptop without clang); CI installs them and builds for real.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const out = path.join(here, 'build');
const lenient = process.argv.includes('--if-possible');

function have(cmd, args = ['--version']) {
  return spawnSync(cmd, args, { stdio: 'ignore' }).status === 0;
}

function skip(why) {
  if (!lenient) {
    console.error(`bpf build: ${why}`);
    process.exit(1);
  }
  console.warn(`bpf build skipped: ${why}; the kernel tests will skip (install clang, llvm, libbpf-dev to build)`);
  process.exit(0);
}

if (process.platform !== 'linux') skip('the kernel datapath needs Linux');
if (!have('clang')) skip('clang not found');
if (!existsSync('/usr/include/bpf/bpf_helpers.h')) skip('libbpf headers not found (libbpf-dev)');

// <asm/types.h> lives under the multiarch include dir on Debian and Ubuntu.
const includes = ['-I', here];
const triple = spawnSync('gcc', ['-dumpmachine'], { encoding: 'utf8' }).stdout?.trim();
if (triple && existsSync(`/usr/include/${triple}`)) includes.push('-I', `/usr/include/${triple}`);

// node-gyp builds against the running Node's headers when they are installed
// next to it (distribution packages), so nothing is downloaded.
const require = createRequire(import.meta.url);
const gyp = require.resolve('node-gyp/bin/node-gyp.js');
const args = [gyp, 'rebuild', '--directory', here, '--loglevel', 'warn'];
const prefix = path.dirname(path.dirname(process.execPath));
if (existsSync(path.join(prefix, 'include', 'node', 'node_api.h'))) args.push(`--nodedir=${prefix}`);
execFileSync(process.execPath, args, { stdio: 'inherit' });
console.log(`built ${path.relative(process.cwd(), path.join(here, 'build', 'Release', 'canopy_bpf.node'))}`);

// After node-gyp: its `rebuild` starts by removing build/.
mkdirSync(out, { recursive: true });
const obj = path.join(out, 'canopy.bpf.o');
execFileSync(
  'clang',
  ['-O2', '-g', '-Wall', '-Werror', '-target', 'bpf', ...includes, '-c', path.join(here, 'canopy.bpf.c'), '-o', obj],
  { stdio: 'inherit' },
);
console.log(`built ${path.relative(process.cwd(), obj)}`);
// The kernel bench's floor: empty programs on the same hooks.
const floor = path.join(out, 'floor.bpf.o');
execFileSync('clang', ['-O2', '-g', '-Wall', '-Werror', '-target', 'bpf', ...includes, '-c', path.join(here, 'floor.bpf.c'), '-o', floor], {
  stdio: 'inherit',
});
console.log(`built ${path.relative(process.cwd(), floor)}`);

