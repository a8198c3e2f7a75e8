/**
 * The CLI's output on a pipe, as `canopy get endpoints -o json | jq` reads it: more than 1 MB from
 * `get endpoints -o json`, `apply --dry-run` and `explain -o json`, read by a reader that sleeps
 * between reads, arrives byte-complete and parses (it was cut at 64 KiB: the process exited before
 * standard output drained); a reader that closes the pipe early ends the command with exit 1 and no
 * stack trace.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { startCanopyProcess, type CanopyProcess } from './support/canopy-process.js';

const CLI = fileURLToPath(new URL('../server/src/cli/canopy.js', import.meta.url));
const ENDPOINTS = 8000;
const MB = 1024 * 1024;

/** One service with ENDPOINTS endpoints over 40 zones; `base` sets their addresses' second octet. */
function bigMesh(base: number) {
  return {
    services: [
      {
        name: 'big',
        endpoints: Array.from({ length: ENDPOINTS }, (_, i) => ({
          address: `10.${base}.${Math.floor(i / 250)}.${(i % 250) + 1}`,
          port: 8080,
          locality: { region: `r${i % 4}`, zone: `r${i % 4}-z${i % 40}`, subzone: `s${i % 3}` },
        })),
      },
    ],
  };
}

interface Piped {
  readonly code: number | null;
  readonly stdout: Buffer;
  readonly stderr: string;
  readonly reads: number;
}

/** Runs the CLI with its stdout on a pipe that the test reads slowly: a pause after every chunk. */
function runSlowReader(args: string[], pauseMs = 3): Promise<Piped> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    const chunks: Buffer[] = [];
    let stderr = '';
    let reads = 0;
    child.stdout.on('data', (c: Buffer) => {
      chunks.push(c);
      reads++;
      child.stdout.pause();
      setTimeout(() => child.stdout.resume(), pauseMs);
    });
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`canopy ${args.join(' ')} did not finish in 60 s`));
    }, 60_000);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout: Buffer.concat(chunks), stderr, reads });
    });
  });
}

describe('canopy output on a pipe', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'canopy-pipes-'));
  let server: CanopyProcess;
  before(async () => {
    server = await startCanopyProcess(bigMesh(0));
  });
  after(async () => {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });
  const admin = () => ['--admin', server.adminUrl];

  it('get endpoints -o json: over 1 MB, complete to a slow reader, and parseable', async () => {
    const r = await runSlowReader(['get', 'endpoints', '-o', 'json', ...admin()]);
    assert.equal(r.code, 0, r.stderr);
    assert.ok(r.stdout.length > MB, `${r.stdout.length} bytes`);
    assert.ok(r.reads > 1, 'the reader read more than once');
    const doc = JSON.parse(r.stdout.toString('utf8')) as { endpoints: unknown[] };
    assert.equal(doc.endpoints.length, ENDPOINTS);
    assert.ok(r.stdout.toString('utf8').endsWith('}\n'));
  });

  it('apply --dry-run: every line of a diff over 1 MB reaches a slow reader', async () => {
    const file = path.join(dir, 'moved.json');
    writeFileSync(file, JSON.stringify(bigMesh(1)));
    const r = await runSlowReader(['apply', '-f', file, '--dry-run', ...admin()]);
    assert.equal(r.code, 0, r.stderr);
    assert.ok(r.stdout.length > MB, `${r.stdout.length} bytes`);
    const lines = r.stdout.toString('utf8').trimEnd().split('\n');
    assert.equal(lines[0], 'service/big configured (dry run)');
    assert.equal(lines.filter((l) => l.startsWith('  + ')).length, ENDPOINTS);
    assert.equal(lines.filter((l) => l.startsWith('  - ')).length, ENDPOINTS);
    assert.match(lines.at(-1)!, /^ {2}- 10\.0\.\d+\.\d+:8080$/);
  });

  it('explain -o json: complete and parseable to a slow reader', async () => {
    const r = await runSlowReader(['explain', '--service', 'big', '--region', 'r1', '-o', 'json', ...admin()]);
    assert.equal(r.code, 0, r.stderr);
    assert.ok(r.stdout.length > MB, `${r.stdout.length} bytes`);
    const doc = JSON.parse(r.stdout.toString('utf8')) as { endpoints: unknown[] };
    assert.equal(doc.endpoints.length, ENDPOINTS);
  });

  it('a reader that closes the pipe early: exit 1, no stack trace', async () => {
    const child = spawn(process.execPath, [CLI, 'get', 'endpoints', '-o', 'json', ...admin()], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    // As `| head -c 10` does: read the first chunk, then close the pipe.
    child.stdout.once('data', () => child.stdout.destroy());
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    assert.equal(code, 1);
    assert.doesNotMatch(stderr, /\n\s+at |Error:/, stderr);
  });
});
