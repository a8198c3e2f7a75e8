/**
 * Load-aware metrics from real plans (the load controller on a test clock):
 * per service, per backend locality and per client tree node, with the label
 * sets capped however many localities and client nodes report.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Registry } from 'prom-client';
import { MAX_SERIES, registerLoadMetrics } from '../src/admin/load-metrics.js';
import { parseLocality } from '../src/domain/locality.js';
import { Mesh } from '../src/domain/mesh.js';
import { parseServiceSpec } from '../src/domain/spec.js';
import { LoadController } from '../src/sessions/load-controller.js';

function setup(zones: number) {
  const mesh = new Mesh();
  const names = Array.from({ length: zones }, (_, i) => `r1/z${String(i).padStart(3, '0')}/s`);
  const spec = parseServiceSpec({
    name: 'echo',
    loadBalancing: {
      mode: 'failover',
      routingPreference: ['region', 'zone', 'subzone'],
      loadAware: { balancing: 'waterfall', capacityRps: 10 },
    },
    endpoints: names.map((z, i) => ({ address: `10.0.${i >> 8}.${i & 255}`, port: 80, locality: parseLocality(z) })),
  });
  assert.ok(spec.ok);
  mesh.put(spec.value);
  const load = new LoadController({ mesh, intervalMs: 1000, notify: () => {}, now: () => 1000 });
  // A client in every zone, offering 1 rps more per zone: the busiest zones are the last ones.
  names.forEach((z, i) =>
    load.record(`c${i}`, { locality: parseLocality(z), network: '', node: '', cluster: '', labels: {} }, [
      {
        service: 'echo',
        intervalSeconds: 1,
        upstream: [{ locality: parseLocality(z), issued: i + 1, succeeded: i + 1, errors: 0, inProgress: 0 }],
      },
    ]),
  );
  load.tick();
  const registry = new Registry();
  registerLoadMetrics(registry, load);
  return { registry, names };
}

const series = (text: string, name: string) => text.split('\n').filter((l) => l.startsWith(`${name}{`));

describe('load-aware metrics', () => {
  it('per service, per locality and per client node, from the last interval', async () => {
    const { registry } = setup(3);
    const text = await registry.metrics();
    assert.match(text, /^canopy_load_offered_rps\{service="echo"\} 6$/m);
    assert.match(text, /^canopy_load_capacity_rps\{service="echo"\} 30$/m);
    assert.match(text, /^canopy_load_replicas\{service="echo"\} 1$/m);
    assert.match(text, /^canopy_load_landed_rps\{service="echo",locality="r1\/z002\/s"\} 3$/m);
    assert.match(text, /^canopy_load_locality_capacity_rps\{service="echo",locality="r1\/z000\/s"\} 10$/m);
    assert.match(text, /^canopy_load_node_offered_rps\{service="echo",node="r1\/z001\/s"\} 2$/m);
    assert.match(text, /^canopy_load_spill_fraction\{service="echo"\} 0$/m);
    assert.equal(
      series(text, 'canopy_load_landed_rps').some((l) => l.includes('"other"')),
      false,
    );
  });

  it(`caps each per-locality and per-node metric at ${MAX_SERIES} label values a service, the rest as "other"`, async () => {
    const { registry, names } = setup(MAX_SERIES + 20);
    const text = await registry.metrics();
    for (const name of [
      'canopy_load_landed_rps',
      'canopy_load_node_offered_rps',
      'canopy_load_locality_capacity_rps',
    ]) {
      const lines = series(text, name);
      assert.equal(lines.length, MAX_SERIES + 1, `${name}: ${lines.length} series`);
      assert.ok(
        lines.some((l) => l.includes('="other"}')),
        name,
      );
    }
    // The busiest are kept by name; the 20 quietest (1..20 rps) are summed.
    assert.match(
      text,
      new RegExp(
        `^canopy_load_node_offered_rps\\{service="echo",node="${names.at(-1)!.replace(/\//g, '\\/')}"\\} ${MAX_SERIES + 20}$`,
        'm',
      ),
    );
    assert.match(text, /^canopy_load_node_offered_rps\{service="echo",node="other"\} 210$/m);
  });
});
