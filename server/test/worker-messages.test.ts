/**
 * The xDS workers' message batches (transport/worker-messages.ts): a push's writes of the same bytes to
 * many streams travel as one entry, flushes likewise, and nothing is reordered.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Batch, type MainOp, type WorkerEvent } from '../src/transport/worker-messages.js';

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
});
