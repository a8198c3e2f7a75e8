/**
 * The outbound layout of domain/outbound.ts and the route settings: who shares
 * a sidecar listener in each mode, what cannot share (refused at config load
 * with the field path), and the route fields read with their paths and
 * written back as they were given.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { outboundLayout, type OutboundMode } from '../src/domain/outbound.js';
import type { ServiceSpec } from '../src/domain/service.js';
import { parseConfig, parseServiceSpec, serviceSpecToJson } from '../src/domain/spec.js';
import { routeOf } from '../src/domain/upstream.js';
import { ep, service } from './support/builders.js';

const svc = (name: string, extra: Partial<ServiceSpec>): ServiceSpec => ({ ...service(name, [ep()]), ...extra });

function layout(mode: OutboundMode, ...specs: ServiceSpec[]): Record<string, string[]> {
  const l = outboundLayout(specs, mode);
  return Object.fromEntries(
    [...l.groups].map(([name, g]) => [
      name,
      [
        ...g.http.map((s) => s.name),
        ...g.tcpByVip.map((s) => `${s.name}@${s.vip}`),
        ...(g.tcp ? [`${g.tcp.name}*`] : []),
      ],
    ]),
  );
}

describe('outbound layout', () => {
  const a = svc('a', { port: 80, vip: '10.0.0.1' });
  const b = svc('b', { port: 80, vip: '10.0.0.2', protocol: 'http' });
  const t1 = svc('t1', { port: 80, vip: '10.0.0.3', protocol: 'tcp', outboundPort: 15080 });
  const t2 = svc('t2', { port: 5432, protocol: 'tcp' });
  const t3 = svc('t3', { port: 5432, vip: '10.0.0.4', protocol: 'tcp', outboundPort: 15432 });

  const cases: [string, OutboundMode, ServiceSpec[], Record<string, string[]>][] = [
    ['a service alone has a listener named after it', 'transparent', [a], { a: ['a'] }],
    [
      'HTTP services and a TCP one with a VIP share a port',
      'transparent',
      [a, b, t1],
      { 'outbound|0.0.0.0:80': ['a', 'b', 't1@10.0.0.3'] },
    ],
    [
      'a TCP service without a VIP takes what the VIPs do not match',
      'transparent',
      [t2, t3],
      { 'outbound|0.0.0.0:5432': ['t3@10.0.0.4', 't2*'] },
    ],
    [
      'local binds share a local port among HTTP services only',
      'local',
      [a, b, t1, t2, t3],
      { 'outbound|local:80': ['a', 'b'], t1: ['t1*'], t2: ['t2*'], t3: ['t3*'] },
    ],
    [
      'the same VIP and port: the first by name keeps the place',
      'transparent',
      [a, svc('z', { port: 80, vip: '10.0.0.1' })],
      { a: ['a'] },
    ],
    ['no port, no listener', 'transparent', [svc('p', {})], {}],
  ];
  for (const [what, mode, specs, want] of cases) it(what, () => assert.deepEqual(layout(mode, ...specs), want));
});

describe('config load refuses what a sidecar could not tell apart', () => {
  const cfg = (services: object[]) => parseConfig({ services: services.map((s) => ({ endpoints: [], ...s })) });
  const cases: [string, object[], RegExp | undefined][] = [
    [
      'two services on one VIP and port',
      [
        { name: 'a', port: 80, vip: '10.0.0.1' },
        { name: 'b', port: 80, vip: '10.0.0.1' },
      ],
      /^services\[1\]\.vip: 10\.0\.0\.1:80 is also service "a"'s/,
    ],
    [
      'a TCP service without a VIP on an HTTP port',
      [
        { name: 'a', port: 80 },
        { name: 'b', port: 80, protocol: 'tcp' },
      ],
      /^services\[1\]\.vip: port 80 is also service "a"'s; a tcp service on a shared port needs a vip/,
    ],
    [
      'two TCP services on one local port',
      [
        { name: 'a', port: 5432, vip: '10.0.0.1', protocol: 'tcp' },
        { name: 'b', port: 5432, vip: '10.0.0.2', protocol: 'tcp' },
      ],
      /^services\[1\]\.port: local outbound port 5432 is also service "a"'s/,
    ],
    [
      'two TCP services with their own local ports',
      [
        { name: 'a', port: 5432, vip: '10.0.0.1', protocol: 'tcp', outboundPort: 15432 },
        { name: 'b', port: 5432, vip: '10.0.0.2', protocol: 'tcp' },
      ],
      undefined,
    ],
    [
      'HTTP services on one port and VIPs of their own',
      [
        { name: 'a', port: 80, vip: '10.0.0.1' },
        { name: 'b', port: 80, protocol: 'http' },
      ],
      undefined,
    ],
  ];
  for (const [what, services, error] of cases) {
    it(`${what}: ${error ? 'refused' : 'accepted'}`, () => {
      const r = cfg(services);
      if (!error) return assert.ok(r.ok, JSON.stringify(!r.ok && r.errors));
      assert.ok(!r.ok);
      const found = r.errors.map((e) => `${e.path}: ${e.message}`);
      assert.ok(
        found.some((e) => error.test(e)),
        found.join('\n'),
      );
    });
  }
});

describe('route settings', () => {
  it("default to no timeout, Envoy's idle timeout and no retries, and read back as given", () => {
    const plain = parseServiceSpec({ name: 's' });
    assert.ok(plain.ok);
    assert.deepEqual(routeOf(plain.value), { timeoutMs: 0 });
    const input = {
      name: 's',
      timeoutMs: 0,
      idleTimeoutMs: 60000,
      retries: { attempts: 3, retryOn: ['unavailable'] },
      unhealthy: 'park',
    };
    const r = parseServiceSpec(input);
    assert.ok(r.ok);
    assert.deepEqual(routeOf(r.value), {
      timeoutMs: 0,
      idleTimeoutMs: 60000,
      retries: { attempts: 3, retryOn: ['unavailable'] },
    });
    const json = serviceSpecToJson(r.value);
    for (const k of ['timeoutMs', 'idleTimeoutMs', 'retries', 'unhealthy'] as const)
      assert.deepEqual(json[k], input[k]);
  });

  const bad: [object, RegExp][] = [
    [{ timeoutMs: -1 }, /^services\[0\]\.timeoutMs: must be an integer from 0/],
    [{ idleTimeoutMs: 'never' }, /^services\[0\]\.idleTimeoutMs:/],
    [{ retries: { attempts: 0 } }, /^services\[0\]\.retries\.attempts: must be an integer from 1 to 10/],
    [{ retries: { retryOn: ['5xx', 'sometimes'] } }, /^services\[0\]\.retries\.retryOn\[1\]: must be one of/],
    [{ retries: { retryOn: [] } }, /^services\[0\]\.retries\.retryOn: must be a non-empty list/],
    [{ retries: { tries: 2 } }, /^services\[0\]\.retries\.tries: unknown field/],
    [{ unhealthy: 'hide' }, /^services\[0\]\.unhealthy: must be one of park, count/],
  ];
  for (const [extra, error] of bad) {
    it(`refuses ${JSON.stringify(extra)} with its field path`, () => {
      const r = parseServiceSpec({ name: 's', ...extra }, 'services[0]');
      assert.ok(!r.ok);
      const found = r.errors.map((e) => `${e.path}: ${e.message}`);
      assert.ok(
        found.some((e) => error.test(e)),
        found.join('\n'),
      );
    });
  }
});
