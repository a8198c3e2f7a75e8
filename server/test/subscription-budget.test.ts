import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  defaultXdsLimits,
  NAME_OVERHEAD_BYTES,
  StreamAccount,
  SubscriptionBudget,
  type XdsLimits,
} from '../src/transport/subscription-budget.js';

const EDS = 'type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment';
const limits: XdsLimits = {
  maxStreamsPerConnection: 2,
  maxNamesPerConnection: 10,
  maxBytesPerConnection: 10 * (10 + NAME_OVERHEAD_BYTES),
  subscriptionBudgetBytes: 15 * (10 + NAME_OVERHEAD_BYTES),
};
const name = (i: number) => `name-${i}`.padEnd(10, '_');
const names = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => name(from + i));
const sotw = (list: string[], typeUrl = EDS) => ({ kind: 'sotw' as const, typeUrl, names: list });
const delta = (subscribe: string[], unsubscribe: string[] = [], initialVersions = {}) => ({
  kind: 'delta' as const,
  typeUrl: EDS,
  subscribe,
  unsubscribe,
  initialVersions,
});

function stream(budget: SubscriptionBudget, connection: string): StreamAccount {
  const s = budget.openStream(connection);
  assert.ok(s instanceof StreamAccount, JSON.stringify(s));
  return s;
}

describe('SubscriptionBudget', () => {
  it('refuses a connection its third stream, and gives the slot back when one closes', () => {
    const b = new SubscriptionBudget(limits, () => true);
    const one = stream(b, 'c1');
    stream(b, 'c1');
    const third = b.openStream('c1');
    assert.ok(!(third instanceof StreamAccount));
    assert.equal(third.limit, 'streams_per_connection');
    stream(b, 'c2');
    one.close();
    one.close();
    stream(b, 'c1');
  });

  it('counts a SotW type as its last request: re-sending the same names costs nothing more', () => {
    const b = new SubscriptionBudget(limits, () => true);
    const s = stream(b, 'c1');
    for (let i = 0; i < 5; i++) assert.equal(s.admit(sotw(names(0, 8))), undefined);
    assert.equal(b.used, 8 * (10 + NAME_OVERHEAD_BYTES));
    assert.equal(s.admit(sotw(names(0, 11)))?.limit, 'names_per_connection');
    assert.equal(b.used, 8 * (10 + NAME_OVERHEAD_BYTES), 'a refusal changes nothing');
    assert.equal(s.admit(sotw(names(0, 2))), undefined);
    assert.equal(b.used, 2 * (10 + NAME_OVERHEAD_BYTES));
    s.close();
    assert.equal(b.used, 0);
  });

  it('counts delta subscriptions as a set: duplicates once, unsubscribes given back', () => {
    const b = new SubscriptionBudget(limits, () => true);
    const s = stream(b, 'c1');
    assert.equal(s.admit(delta(names(0, 6))), undefined);
    assert.equal(s.admit(delta(names(0, 6))), undefined);
    assert.equal(b.used, 6 * (10 + NAME_OVERHEAD_BYTES));
    assert.equal(s.admit(delta(names(6, 10), names(0, 3))), undefined);
    assert.equal(b.used, 7 * (10 + NAME_OVERHEAD_BYTES));
    assert.equal(s.admit(delta([], [], { [name(20)]: 'v1' })), undefined);
    assert.equal(b.used, 8 * (10 + NAME_OVERHEAD_BYTES) + 2);
  });

  it('spends one budget across connections, and ignores types the server does not serve', () => {
    const b = new SubscriptionBudget(limits, (t) => t === EDS);
    assert.equal(stream(b, 'c1').admit(sotw(names(0, 10))), undefined);
    const s2 = stream(b, 'c2');
    assert.equal(s2.admit(sotw(names(0, 6)))?.limit, 'subscription_budget');
    assert.equal(s2.admit(sotw(names(0, 5))), undefined);
    assert.equal(s2.admit(sotw(names(0, 10), 'type.example/junk')), undefined);
    assert.equal(b.used, 15 * (10 + NAME_OVERHEAD_BYTES));
  });

  it('derives its defaults from the heap limit', () => {
    const d = defaultXdsLimits(256 * 1024 * 1024);
    assert.equal(d.subscriptionBudgetBytes, 64 * 1024 * 1024);
    assert.equal(d.maxBytesPerConnection, 4 * 1024 * 1024);
    assert.equal(defaultXdsLimits(8 * 1024 * 1024).maxBytesPerConnection, 1024 * 1024);
  });

  it("caps one connection's default share at 32 MiB however large the heap", () => {
    const MiB = 1024 * 1024;
    for (const heap of [4144 * MiB, 16 * 1024 * MiB, 256 * 1024 * MiB]) {
      const d = defaultXdsLimits(heap);
      assert.equal(d.subscriptionBudgetBytes, Math.floor(heap / 4), 'the budget still grows with the heap');
      assert.equal(d.maxBytesPerConnection, 32 * MiB, `heap ${heap / MiB} MiB`);
    }
    assert.equal(defaultXdsLimits(1024 * MiB).maxBytesPerConnection, 16 * MiB, 'under the cap: budget / 16');
  });
});
