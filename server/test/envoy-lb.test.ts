/**
 * Envoy's load-balancer arithmetic (server/src/domain/envoy-lb.ts), table-driven over the shapes a real
 * Envoy 1.40 was measured on in e2e/envoy-shares.test.ts (2,000 requests each; the measured split is in
 * the comment of each row), plus the rules that measurement cannot tell apart cheaply.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { envoyShares, type EnvoyHostHealth, type EnvoyHostSets } from '../src/domain/envoy-lb.js';

/** Priority → locality → host health letters (h healthy, u unhealthy, x excluded), one host each, weight 1. */
function sets(spec: string[][]): EnvoyHostSets {
  const health: Record<string, EnvoyHostHealth> = { h: 'healthy', u: 'unhealthy', x: 'excluded' };
  let n = 0;
  return spec.map((locs, p) =>
    locs.map((hosts, l) => ({
      locality: `p${p}l${l}`,
      weight: hosts.length,
      hosts: [...hosts].map((c) => ({ key: `h${++n}`, health: health[c]!, weight: 1 })),
    })),
  );
}

const round = (m: ReadonlyMap<string, number>) =>
  Object.fromEntries([...m].map(([k, v]) => [k, Math.round(v * 1000) / 1000]));

describe("Envoy's load-balancer arithmetic", () => {
  const rows: [string, string[][], Record<string, number>, boolean[]][] = [
    // Real Envoy: 1420 / 580 of 2,000 (SotW).
    ['one of two down spills 30%', [['hu'], ['h']], { h1: 0.7, h3: 0.3 }, [false, false]],
    // Real Envoy: 928 / 1072.
    ['one of three healthy: health 46%', [['huu'], ['h']], { h1: 0.46, h4: 0.54 }, [false, false]],
    // Real Envoy: 940 / 940 / 119 (a draining endpoint, sent UNHEALTHY).
    ['two of three healthy: 93%', [['huh'], ['h']], { h1: 0.465, h3: 0.465, h4: 0.07 }, [false, false]],
    // Real Envoy: ~333 each: every priority in panic, load by host count, all hosts.
    [
      'total panic: by host count, unhealthy hosts included',
      [['huu'], ['u'], ['uu']],
      { h1: 0.17, h2: 0.17, h3: 0.17, h4: 0.16, h5: 0.165, h6: 0.165 },
      [true, true, true],
    ],
    // Real Envoy: 737 / 737 / 526 (region scope: two localities in p0).
    [
      'locality weight scaled by availability',
      [['huh', 'h'], ['hh']],
      { h1: 0.368, h3: 0.368, h4: 0.263 },
      [false, false],
    ],
    ['an excluded host counts in no health', [['hx'], ['h']], { h1: 1 }, [false, false]],
    // p0 health 28 (1 of 5: in panic), p1 70: loads 28 + 71, the rounding's 1 to p0; p0 spreads over all 5.
    [
      'a priority in panic beside one that is not spreads its load over all its hosts',
      [['huuuu'], ['hu']],
      { h1: 0.058, h2: 0.058, h3: 0.058, h4: 0.058, h5: 0.058, h6: 0.71 },
      [true, false],
    ],
  ];
  for (const [title, spec, expected, panic] of rows)
    it(title, () => {
      const r = envoyShares(sets(spec), 140);
      assert.deepEqual(round(r.shares), expected);
      assert.deepEqual(
        r.priorities.map((p) => p.panic),
        panic,
      );
      const total = [...r.shares.values()].reduce((a, b) => a + b, 0);
      assert.ok(Math.abs(total - 1) < 1e-9, `shares add up to 1: ${total}`);
    });

  it('every host excluded or none: everything to priority 0, nothing to share', () => {
    assert.deepEqual(envoyShares([], 140).shares.size, 0);
    assert.deepEqual(
      envoyShares(sets([['x']]), 140).priorities.map((p) => p.load),
      [100],
    );
  });
});
