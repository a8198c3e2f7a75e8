/**
 * A locality's load_balancing_weight is a uint32: a bigger sum must never be
 * sent as its truncation (4,295 endpoints of weight 1,000,000 once arrived as
 * 32,704). Config rejects such a service with the field path; the encoder
 * clamps whatever reaches it another way.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Cla } from '../src/domain/cla.js';
import { MAX_ENDPOINT_WEIGHT, parseServiceSpec } from '../src/domain/spec.js';
import { clampedWeightCount, encodeCla } from '../src/resources/endpoint/endpoint-codec.js';
import { messageType } from '../src/wire/protos.js';
import { ep } from './support/builders.js';

const UINT32_MAX = 4_294_967_295;

function endpointsOf(n: number, weight: number) {
  return Array.from({ length: n }, (_, i) => ({
    address: `10.${i >> 16}.${(i >> 8) & 255}.${i & 255}`,
    port: 80,
    locality: { region: 'r1', zone: 'z1', subzone: 's1' },
    weight,
  }));
}

describe('locality weights beyond uint32', () => {
  it('rejects a service whose endpoint weights sum past uint32, naming the field', () => {
    const r = parseServiceSpec({ name: 'heavy', endpoints: endpointsOf(4_295, MAX_ENDPOINT_WEIGHT) });
    assert.equal(r.ok, false);
    const errors = r.ok ? [] : r.errors;
    assert.equal(errors.length, 1);
    assert.equal(errors[0]?.path, 'endpoints');
    assert.match(errors[0]!.message, /sum to 4295000000.*uint32.*at most 4294967295/);
  });

  it('accepts a service whose weights sum to exactly uint32 max', () => {
    const r = parseServiceSpec({
      name: 'full',
      endpoints: [
        ...endpointsOf(4_294, MAX_ENDPOINT_WEIGHT),
        { ...endpointsOf(1, 1)[0]!, address: '10.9.9.9', weight: 967_295 },
      ],
    });
    assert.equal(r.ok, true, JSON.stringify(r));
  });

  it('encodes a locality weight over uint32 as uint32 max, never wrapped', () => {
    const before = clampedWeightCount();
    const cla: Cla = {
      clusterName: 'heavy',
      overprovisioningFactor: 140,
      groups: [
        {
          locality: { region: 'r1', zone: 'z1', subzone: 's1' },
          priority: 0,
          weight: 4_295_000_000,
          endpoints: [ep()],
        },
        { locality: { region: 'r2', zone: 'z1', subzone: 's1' }, priority: 0, weight: 7, endpoints: [ep()] },
      ],
    };
    const T = messageType('envoy.config.endpoint.v3.ClusterLoadAssignment');
    const decoded = T.toObject(T.decode(encodeCla(cla)), { longs: Number }) as {
      endpoints: { load_balancing_weight: { value: number } }[];
    };
    assert.deepEqual(
      decoded.endpoints.map((e) => e.load_balancing_weight.value),
      [UINT32_MAX, 7],
    );
    assert.equal(clampedWeightCount() - before, 1);
  });
});
