/**
 * `canopy serve`'s heap policy (platform/heap-growth.ts), in a child process each (V8 flags are
 * process-wide): with the default, a stream of 256 KB buffers (a push's responses) is collected by the
 * young generation and starts no full collection per 64 MB; with 0, V8's own accounting comes back and
 * full collections with it.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

const MODULE = fileURLToPath(new URL('../src/platform/heap-growth.js', import.meta.url));

/** Full collections while 2,000 buffers of 256 KB go through a window of 200 live ones (500 MB in all). */
const CHURN = `
import { PerformanceObserver, constants } from 'node:perf_hooks';
const { setHeapGrowth } = await import(process.argv[1]);
setHeapGrowth(Number(process.argv[2]));
let major = 0;
new PerformanceObserver((l) => {
  for (const e of l.getEntries()) if (e.detail?.kind === constants.NODE_PERFORMANCE_GC_MAJOR) major++;
}).observe({ entryTypes: ['gc'] });
const live = [];
for (let i = 0; i < 2000; i++) {
  const b = Buffer.allocUnsafe(256 * 1024);
  b[0] = i;
  live.push(b);
  if (live.length > 200) live.shift();
  if (i % 100 === 0) await new Promise((r) => setImmediate(r));
}
await new Promise((r) => setTimeout(r, 100));
console.log(major);
`;

function fullCollections(percent: number): number {
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', CHURN, MODULE, String(percent)], {
    encoding: 'utf8',
    timeout: 30_000,
  });
  assert.equal(r.status, 0, r.stderr);
  return Number(r.stdout.trim());
}

describe('heap growth', () => {
  it("counts array buffers in the heap's global limit: 500 MB of responses start no full collection per 64 MB", () => {
    const v8Own = fullCollections(0);
    const canopy = fullCollections(100);
    assert.ok(v8Own >= 3, `V8's own accounting: ${v8Own} full collections`);
    assert.ok(canopy < v8Own && canopy <= 1, `canopy serve's default: ${canopy} full collections (V8's own: ${v8Own})`);
  });
});
