import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { FieldError } from '../src/domain/errors.js';
import { isIp, parseConfig, parseServiceSpec, patchEndpoint, serviceSpecToJson } from '../src/domain/spec.js';

const ep = { address: '10.0.0.1', port: 80 };

function errorsOf(result: { ok: boolean; errors?: readonly FieldError[] }): string[] {
  assert.equal(result.ok, false, 'expected validation to fail');
  return (result.errors ?? []).map((e) => `${e.path}: ${e.message}`);
}

describe('parseServiceSpec', () => {
  it('fills defaults', () => {
    const r = parseServiceSpec({ name: 'svc', endpoints: [ep] });
    assert.ok(r.ok);
    assert.deepEqual(r.value.loadBalancing, {
      mode: 'failover',
      routingPreference: ['region', 'zone', 'subzone'],
      crossNetworkFailover: true,
      overprovisioningFactor: 140,
    });
    assert.deepEqual(r.value.endpoints[0], {
      address: '10.0.0.1',
      port: 80,
      locality: { region: '', zone: '', subzone: '' },
      network: '',
      node: '',
      cluster: '',
      labels: {},
      health: 'healthy',
      weight: 1,
    });
  });

  const bad: [string, unknown, string][] = [
    ['missing name', { endpoints: [] }, 'name: must be a string'],
    ['bad name', { name: '-x' }, 'name: must be 1-253 characters'],
    ['unknown field', { name: 's', prot: 1 }, 'prot: unknown field'],
    ['bad mode', { name: 's', loadBalancing: { mode: 'nearest' } }, 'loadBalancing.mode: must be one of random, failover, strict'],
    ['bad scope', { name: 's', loadBalancing: { routingPreference: ['region', 'rack'] } }, 'loadBalancing.routingPreference[1]: must be network'],
    ['duplicate scope', { name: 's', loadBalancing: { routingPreference: ['zone', 'zone'] } }, 'loadBalancing.routingPreference[1]: duplicate scope'],
    ['too many scopes', { name: 's', loadBalancing: { routingPreference: ['network', 'region', 'zone', 'subzone', 'node', 'cluster', 'label:a', 'label:b', 'label:c'] } }, 'loadBalancing.routingPreference: must have 1 to 8 scopes'],
    ['empty scopes', { name: 's', loadBalancing: { routingPreference: [] } }, 'loadBalancing.routingPreference: must have 1 to 8 scopes'],
    ['overprovisioning', { name: 's', loadBalancing: { overprovisioningFactor: 50 } }, 'loadBalancing.overprovisioningFactor: must be between 100'],
    ['address', { name: 's', endpoints: [{ address: 'example.com', port: 80 }] }, 'endpoints[0].address: must be an IPv4 or IPv6 address'],
    ['port', { name: 's', endpoints: [{ address: '10.0.0.1', port: 70000 }] }, 'endpoints[0].port: must be between 1 and 65535'],
    ['health', { name: 's', endpoints: [{ ...ep, health: 'sick' }] }, 'endpoints[0].health: must be one of healthy, unhealthy, draining'],
    ['weight', { name: 's', endpoints: [{ ...ep, weight: 0 }] }, 'endpoints[0].weight: must be between 1 and 1000000'],
    ['label value', { name: 's', endpoints: [{ ...ep, labels: { a: 1 } }] }, 'endpoints[0].labels.a: must be a string'],
    ['locality field', { name: 's', endpoints: [{ ...ep, locality: { region: 'r', rack: 'x' } }] }, 'endpoints[0].locality.rack: unknown field'],
    ['duplicate endpoint', { name: 's', endpoints: [ep, { ...ep, weight: 2 }] }, 'endpoints[1]: duplicate endpoint 10.0.0.1:80'],
    ['vip', { name: 's', vip: '10.0.0.300' }, 'vip: must be an IPv4 or IPv6 address'],
  ];
  for (const [name, input, want] of bad) {
    it(`rejects ${name} with the field path`, () => {
      const errs = errorsOf(parseServiceSpec(input));
      assert.ok(errs.some((e) => e.startsWith(want)), `${JSON.stringify(errs)} should include "${want}"`);
    });
  }

  it('collects every error, not just the first', () => {
    const errs = errorsOf(parseServiceSpec({ name: 5, endpoints: [{ address: 'x', port: 'y' }, { port: 1 }] }));
    assert.ok(errs.length >= 4, JSON.stringify(errs));
  });

  it('round-trips through its JSON form', () => {
    const input = {
      name: 'svc',
      port: 8080,
      vip: '10.96.0.1',
      loadBalancing: { mode: 'strict', routingPreference: ['network', 'region', 'label:tier'], crossNetworkFailover: false, overprovisioningFactor: 200 },
      endpoints: [{ address: 'fd00::1', port: 80, locality: { region: 'r', zone: 'z', subzone: 's' }, network: 'n1', labels: { tier: 'gold' }, health: 'draining', weight: 7 }],
    };
    const first = parseServiceSpec(input);
    assert.ok(first.ok);
    const again = parseServiceSpec(serviceSpecToJson(first.value));
    assert.ok(again.ok);
    assert.deepEqual(again.value, first.value);
  });
});

describe('parseConfig', () => {
  it('requires services and rejects duplicate names with their index', () => {
    assert.ok(errorsOf(parseConfig({})).some((e) => e.startsWith('services: must be a list')));
    const errs = errorsOf(parseConfig({ services: [{ name: 'a' }, { name: 'a' }] }));
    assert.deepEqual(errs, ['services[1].name: duplicate service name "a"']);
  });

  it('reads server settings and prefixes nested paths', () => {
    const ok = parseConfig({ server: { xdsPort: 0, adminPort: 9000, debounceMs: 10 }, services: [] });
    assert.ok(ok.ok);
    assert.deepEqual(ok.value.server, { xdsPort: 0, adminPort: 9000, debounceMs: 10 });
    const errs = errorsOf(parseConfig({ server: { xdsPort: -1 }, services: [{ name: 's', endpoints: [{ address: '1.2.3.4', port: 0 }] }] }));
    assert.deepEqual(errs.map((e) => e.split(':')[0]), ['services[0].endpoints[0].port', 'server.xdsPort']);
  });
});

describe('patchEndpoint and isIp', () => {
  it('patches health and weight, and rejects anything else', () => {
    const base = parseServiceSpec({ name: 's', endpoints: [ep] });
    assert.ok(base.ok);
    const e = base.value.endpoints[0];
    assert.ok(e);
    const p = patchEndpoint(e, { health: 'unhealthy', weight: 3 });
    assert.ok(p.ok);
    assert.equal(p.value.health, 'unhealthy');
    assert.equal(p.value.weight, 3);
    assert.deepEqual(errorsOf(patchEndpoint(e, { address: '1.1.1.1' })), ['address: unknown field (expected one of: health, weight)']);
  });

  it('accepts IP literals only', () => {
    for (const ok of ['127.0.0.1', '0.0.0.0', '::1', 'fd00::a:1', '2001:db8:0:0:0:0:0:1', '::ffff:10.0.0.1']) assert.ok(isIp(ok), ok);
    for (const no of ['256.0.0.1', '1.2.3', 'host', '1::2::3', '12345::', '']) assert.ok(!isIp(no), no);
  });
});
