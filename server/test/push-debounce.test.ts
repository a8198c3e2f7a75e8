/**
 * The debounce's decision (sessions/push-debounce.ts): the first change on a quiet mesh goes at once, a
 * burst waits for its quiet period, a steady stream of changes for at most the maximum delay.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { pushDelay, type DebounceState } from '../src/sessions/push-debounce.js';

const DEBOUNCE = 100;
const MAX = 1000;

describe('the push debounce', () => {
  const cases: [string, DebounceState, number, number | 'keep'][] = [
    [
      'the first change ever goes at once',
      { firstChangeAt: 5, lastPushAt: undefined, leadingDue: false, mayLead: true },
      5,
      0,
    ],
    [
      'a change long after the last push goes at once',
      { firstChangeAt: 500, lastPushAt: 300, leadingDue: false, mayLead: true },
      500,
      0,
    ],
    [
      'a change exactly one debounce after the push goes at once',
      { firstChangeAt: 400, lastPushAt: 300, leadingDue: false, mayLead: true },
      400,
      0,
    ],
    [
      'a change right after a push waits for the quiet period',
      { firstChangeAt: 310, lastPushAt: 300, leadingDue: false, mayLead: true },
      310,
      DEBOUNCE,
    ],
    [
      'a change while a leading push is due joins it',
      { firstChangeAt: 500, lastPushAt: 300, leadingDue: true, mayLead: true },
      502,
      'keep',
    ],
    [
      'a second change of a burst restarts the quiet period',
      { firstChangeAt: 310, lastPushAt: 300, leadingDue: false, mayLead: true },
      350,
      DEBOUNCE,
    ],
    [
      'a quiet mesh with a change already waiting: still the burst',
      { firstChangeAt: 450, lastPushAt: 300, leadingDue: false, mayLead: true },
      460,
      DEBOUNCE,
    ],
    [
      'a steady stream is held no longer than the maximum',
      { firstChangeAt: 310, lastPushAt: 300, leadingDue: false, mayLead: true },
      1260,
      50,
    ],
    ['past the maximum: at once', { firstChangeAt: 310, lastPushAt: 300, leadingDue: false, mayLead: true }, 1400, 0],
  ];
  const deletion = { lastPushAt: 300, leadingDue: false, mayLead: false };
  cases.push(
    ['a deletion on a quiet mesh waits for the debounce', { ...deletion, firstChangeAt: 500 }, 500, DEBOUNCE],
    [
      'a deletion while a leading push is due: the debounce',
      { ...deletion, firstChangeAt: 500, leadingDue: true },
      500,
      DEBOUNCE,
    ],
    ['a deletion past the maximum: at once', { ...deletion, firstChangeAt: 310 }, 1400, 0],
  );
  for (const [what, state, now, want] of cases) {
    it(what, () => assert.equal(pushDelay(state, now, DEBOUNCE, MAX), want));
  }

  it('with no debounce every change goes at once', () => {
    assert.equal(pushDelay({ firstChangeAt: 10, lastPushAt: 9, leadingDue: false, mayLead: true }, 10, 0, 0), 0);
  });

  it('a burst of 100 changes a millisecond apart makes two pushes: its first change, then the rest merged', () => {
    let lastPushAt: number | undefined;
    let firstChangeAt: number | undefined;
    let dueAt: number | undefined;
    let leadingDue = false;
    const pushes: number[] = [];
    const fire = (until: number) => {
      if (dueAt !== undefined && dueAt <= until) {
        pushes.push(dueAt);
        lastPushAt = dueAt;
        firstChangeAt = dueAt = undefined;
        leadingDue = false;
      }
    };
    for (let now = 0; now < 100; now++) {
      fire(now - 1);
      firstChangeAt ??= now;
      const wait = pushDelay({ firstChangeAt, lastPushAt, leadingDue, mayLead: true }, now, DEBOUNCE, MAX);
      if (wait === 'keep') continue;
      leadingDue = wait === 0;
      dueAt = now + wait;
    }
    fire(Infinity);
    assert.deepEqual(pushes, [0, 99 + DEBOUNCE]);
  });
});
