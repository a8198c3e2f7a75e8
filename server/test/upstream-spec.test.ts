/** The sidecar settings of a service: protocol, timeouts, outlier detection, health checks. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Mesh } from '../src/domain/mesh.js';
import { parseServiceSpec, serviceSpecToJson } from '../src/domain/spec.js';
import { DEFAULT_HEALTH_CHECK, DEFAULT_OUTLIER_DETECTION, upstreamOf } from '../src/domain/upstream.js';

function parsed(extra: object) {
  const r = parseServiceSpec({ name: 'svc', ...extra });
  assert.ok(r.ok, JSON.stringify(!r.ok && r.errors));
  return r.value;
}

function errors(extra: object): string[] {
  const r = parseServiceSpec({ name: 'svc', ...extra }, 'services[0]');
  assert.ok(!r.ok, 'expected a validation error');
  return r.errors.map((e) => `${e.path}: ${e.message}`);
}

describe('sidecar settings', () => {
  it('default to gRPC, a 1 s connect timeout, no outlier detection and no health checks', () => {
    assert.deepEqual(upstreamOf(parsed({})), { protocol: 'grpc', connectTimeoutMs: 1000 });
  });

  it('turn a feature on with its defaults from an empty object, and take overrides', () => {
    const spec = parsed({ protocol: 'http', outlierDetection: {}, healthCheck: { path: '/ready', intervalMs: 2000 } });
    assert.deepEqual(upstreamOf(spec), {
      protocol: 'http',
      connectTimeoutMs: 1000,
      outlierDetection: DEFAULT_OUTLIER_DETECTION,
      healthCheck: { ...DEFAULT_HEALTH_CHECK, path: '/ready', intervalMs: 2000 },
    });
  });

  const bad: [string, object, RegExp][] = [
    ['an unknown protocol', { protocol: 'udp' }, /^services\[0\]\.protocol: must be one of grpc, http, tcp/],
    ['a zero connect timeout', { connectTimeoutMs: 0 }, /^services\[0\]\.connectTimeoutMs: must be an integer from 1/],
    [
      'an outlier percent above 100',
      { outlierDetection: { maxEjectionPercent: 101 } },
      /^services\[0\]\.outlierDetection\.maxEjectionPercent:/,
    ],
    [
      'a typo in outlier detection',
      { outlierDetection: { consecutive5XX: 3 } },
      /^services\[0\]\.outlierDetection\.consecutive5XX: unknown field/,
    ],
    [
      'a relative health-check path',
      { healthCheck: { path: 'healthz' } },
      /^services\[0\]\.healthCheck\.path: must start with "\/"/,
    ],
    ['a zero threshold', { healthCheck: { healthyThreshold: 0 } }, /^services\[0\]\.healthCheck\.healthyThreshold:/],
    ['an outbound port out of range', { outboundPort: 70000 }, /^services\[0\]\.outboundPort:/],
  ];
  for (const [what, extra, message] of bad) {
    it(`reject ${what} with its field path`, () => {
      const found = errors(extra);
      assert.ok(
        found.some((e) => message.test(e)),
        found.join('\n'),
      );
    });
  }

  it('survive the canonical JSON form unchanged', () => {
    const spec = parsed({ protocol: 'tcp', connectTimeoutMs: 250, healthCheck: {}, outboundPort: 15001 });
    assert.deepEqual(parsed(serviceSpecToJson(spec)), spec);
  });

  it('are a change to the mesh when they change', () => {
    const mesh = new Mesh();
    mesh.put(parsed({}));
    assert.equal(mesh.put(parsed({})), undefined);
    assert.equal(mesh.put(parsed({ protocol: 'http' }))?.kind, 'updated');
    assert.equal(mesh.put(parsed({ protocol: 'http', outlierDetection: {} }))?.kind, 'updated');
  });
});
