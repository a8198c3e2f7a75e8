/**
 * The xDS workers' message batches (transport/worker-messages.ts): a push's writes of the same bytes to
 * many streams travel as one entry, flushes likewise, and nothing is reordered.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Batch, tight, type MainOp, type WorkerEvent } from '../src/transport/worker-messages.js';

function posted<T extends MainOp | WorkerEvent>(items: T[]): Promise<T[]> {
  return new Promise((resolve) => {
    const batch = new Batch<T>(resolve);
    for (const item of items) batch.push(item);
  });
}

describe('worker message batches', () => {
  it('merges consecutive writes of the same message and keeps every other op in its place', async () => {
    const a = new Uint8Array(4);
    const b = new Uint8Array(4);
    const ops = await posted<MainOp>([
      { t: 'write', ids: [1], msg: a },
      { t: 'write', ids: [2], msg: a },
      { t: 'write', ids: [3], msg: b },
      { t: 'end', id: 3 },
      { t: 'write', ids: [4], msg: b },
      { t: 'write', ids: [5], msg: b },
      { t: 'write', ids: [6], msg: a },
    ]);
    assert.deepEqual(ops, [
      { t: 'write', ids: [1, 2], msg: a },
      { t: 'write', ids: [3], msg: b },
      { t: 'end', id: 3 },
      { t: 'write', ids: [4, 5], msg: b },
      { t: 'write', ids: [6], msg: a },
    ]);
  });

  it('merges consecutive flushes, never across another event', async () => {
    const events = await posted<WorkerEvent>([
      { t: 'flushed', ids: [1] },
      { t: 'flushed', ids: [2] },
      { t: 'end', id: 2 },
      { t: 'flushed', ids: [2] },
    ]);
    assert.deepEqual(events, [
      { t: 'flushed', ids: [1, 2] },
      { t: 'end', id: 2 },
      { t: 'flushed', ids: [2] },
    ]);
  });

  it('sends a slice of a bigger buffer as its own bytes, and shared memory or a whole buffer as it is', () => {
    const pool = Buffer.alloc(8192, 1);
    const slice = pool.subarray(100, 110);
    const copy = tight(slice) as Uint8Array;
    assert.equal(copy.buffer.byteLength, 10);
    assert.deepEqual([...copy], [...slice]);
    const whole = new Uint8Array(16);
    assert.equal(tight(whole), whole);
    const shared = new Uint8Array(new SharedArrayBuffer(64), 8, 8);
    assert.equal(tight(shared), shared);
    assert.equal(tight('text'), 'text');
  });
});
