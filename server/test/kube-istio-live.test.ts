/**
 * Istio DestinationRules read live (kube/kube-istio.ts): two rules for one
 * Service, the older wins, as in Istio. The client library hands
 * `creationTimestamp` over as a Date, whose string form starts with the
 * weekday: ordered by that, a Friday's rule would beat the Saturday before it.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DestinationRules } from '../src/kube/kube-istio.js';

const rule = (name: string, created: Date) => ({
  apiVersion: 'networking.istio.io/v1',
  kind: 'DestinationRule',
  metadata: { name, namespace: 'shop', creationTimestamp: created },
  spec: { host: 'web' },
});

describe('live DestinationRules', () => {
  it('two rules for one Service: the older wins, by time, not by the text of a Date', () => {
    const rules = new DestinationRules();
    // Saturday 21 November is older than Friday 27 November.
    assert.deepEqual(rules.change(rule('newer', new Date('2026-11-27T10:00:00Z')), true), ['web.shop']);
    assert.deepEqual(rules.change(rule('older', new Date('2026-11-21T10:00:00Z')), true), ['web.shop']);
    assert.equal(rules.get('web.shop')?.at, 'DestinationRule shop/older');
    rules.change(rule('older', new Date('2026-11-21T10:00:00Z')), false);
    assert.equal(rules.get('web.shop')?.at, 'DestinationRule shop/newer');
  });
});
