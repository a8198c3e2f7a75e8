/**
 * What `canopy serve`'s full collection after a burst frees goes back to the system
 * (platform/freed-pages.ts): in a child process (RSS is the process's), 300 MB of 256 KB buffers, as
 * grpc-js's copies of a push's responses are, with small long-lived allocations among them, so that
 * glibc's free() alone keeps the pages; after the collection RSS falls by most of it. And
 * `CANOPY_TRIM_MEMORY=off` turns it off.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { canReleaseFreedPages } from '../src/platform/freed-pages.js';

const MODULE = fileURLToPath(new URL('../src/platform/full-collection.js', import.meta.url));
const FREED = fileURLToPath(new URL('../src/platform/freed-pages.js', import.meta.url));

const BURST = `
const { fullCollection } = await import(process.argv[1]);
const collect = fullCollection();
const rss = () => process.memoryUsage().rss;
let burst = [];
const kept = [];
for (let i = 0; i < 1200; i++) {
  burst.push(Buffer.allocUnsafe(256 * 1024).fill(i));
  kept.push(Buffer.allocUnsafe(9000).fill(i));
}
const peak = rss();
burst = undefined;
collect();
const deadline = Date.now() + 20_000;
while (peak - rss() < 200 * 2 ** 20 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
console.log(JSON.stringify({ peakMB: peak / 2 ** 20, afterMB: rss() / 2 ** 20, kept: kept.length }));
`;

const missing = canReleaseFreedPages() ? undefined : 'no glibc malloc_trim through koffi on this platform';
if (missing && process.env['CI'] === 'true') throw new Error(`freed pages: ${missing}`);

describe('freed pages', () => {
  it('gives a burst of 256 KB buffers back to the system after the full collection', { skip: missing }, () => {
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', BURST, MODULE], {
      encoding: 'utf8',
      timeout: 60_000,
    });
    assert.equal(r.status, 0, r.stderr);
    const { peakMB, afterMB } = JSON.parse(r.stdout) as { peakMB: number; afterMB: number };
    assert.ok(peakMB - afterMB >= 200, `RSS ${peakMB.toFixed(0)} MB at the burst, ${afterMB.toFixed(0)} MB after`);
  });

  it('trims nothing with CANOPY_TRIM_MEMORY=off', () => {
    const probe = `const m = await import(process.argv[1]); console.log(m.canReleaseFreedPages(), m.releaseFreedPages());`;
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', probe, FREED], {
      encoding: 'utf8',
      env: { ...process.env, CANOPY_TRIM_MEMORY: 'off' },
    });
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout.trim(), 'false false');
  });
});
