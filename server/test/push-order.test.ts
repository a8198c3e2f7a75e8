/**
 * The push goes out by response: streams that get the same bytes are let
 * through the window back to back, so the shared-responses cache needs to
 * hold only the response of the group going out, not every distinct one for
 * the whole push, and still encodes each distinct response once.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { sharedEncodeCount } from '../src/sessions/shared-responses.js';
import { CLA_BYTES, collector, interleaved } from './support/region-streams.js';

/** How many runs of equal regions `order` has (a region written in one run per push: its streams back to back). */
function runs(order: readonly string[]): number {
  return order.filter((r, i) => i === 0 || order[i - 1] !== r).length;
}

describe('the push by response', () => {
  it('lets the streams of one response through the window back to back, on the initial path and on a push', async () => {
    const REGIONS = 4;
    const p = interleaved(24, REGIONS, { pushWindow: 2, sharedBytes: CLA_BYTES * 2 });
    await p.until(1);
    // The first two took the free slots; every stream waiting after them went out with its region's.
    assert.ok(runs(p.order) <= REGIONS + 2, `initial writes by region: ${p.order.join(' ')}`);
    const initial = p.order.length;
    p.change();
    await p.until(2);
    const pushed = p.order.slice(initial);
    assert.equal(runs(pushed), REGIONS, `push writes by region: ${pushed.join(' ')}`);
    p.ads.close();
  });

  it('encodes each distinct response once per push while holding one at a time, the collector running between writes', async () => {
    const REGIONS = 5;
    const before = sharedEncodeCount();
    // Room for one 256 KB response only: without the order, every stream but the first of a run would encode again.
    const p = interleaved(40, REGIONS, {
      pushWindow: 2,
      sharedBytes: CLA_BYTES + 1024,
      sharedAnswerBytes: CLA_BYTES + 1024,
      gc: collector(),
    });
    await p.until(1);
    const initial = sharedEncodeCount() - before;
    assert.ok(initial <= REGIONS + 2, `initial path: ${initial} encodes for ${REGIONS} distinct responses`);
    const pushed = sharedEncodeCount();
    p.change();
    await p.until(2);
    assert.equal(sharedEncodeCount() - pushed, REGIONS, 'one push: one encode per distinct response');
    p.ads.close();
  });
});

describe('the push by share group', () => {
  /** Encodes of one push to streams in REGIONS × ZONES placements whose bytes depend on the region only. */
  async function pushEncodes(shareGroup: boolean): Promise<number> {
    const REGIONS = 3;
    const ZONES = 4;
    // Room for one 256 KB response only, the collector running between writes.
    const p = interleaved(REGIONS * ZONES * 2, REGIONS, {
      zones: ZONES,
      shareGroup,
      pushWindow: 2,
      sharedBytes: CLA_BYTES + 1024,
      sharedAnswerBytes: CLA_BYTES + 1024,
      gc: collector(),
    });
    await p.until(1);
    const pushed = sharedEncodeCount();
    p.change();
    await p.until(2);
    p.ads.close();
    return sharedEncodeCount() - pushed;
  }

  it('lets placements that get the same bytes through together when the type names its share group', async () => {
    // The region is each placement's share group: one encode per region, though 12 placements ask.
    assert.equal(await pushEncodes(true), 3);
  });

  it('encodes again when it can only tell placements apart (the reason for share groups)', async () => {
    // By placement, each region's four zones go out as four groups, their response collected in between.
    assert.ok((await pushEncodes(false)) > 3);
  });
});

describe('the collection after a burst', () => {
  it('runs once writing has stopped after a big burst, once per burst', async () => {
    let collections = 0;
    const settle = () => new Promise((r) => setTimeout(r, 60));
    // 8 × 256 KB answers: over the 1 MB threshold.
    const p = interleaved(8, 2, {
      pushWindow: 2,
      sharedBytes: CLA_BYTES * 2,
      collect: () => collections++,
      collectAfterBytes: 1024 * 1024,
      collectIdleMs: 20,
    });
    await p.until(1);
    await settle();
    assert.equal(collections, 1, 'one collection after the initial burst');
    await settle();
    assert.equal(collections, 1, 'and no more while idle');
    p.change();
    await p.until(2);
    await settle();
    assert.equal(collections, 2, 'one after the push');
    p.ads.close();
  });
});
