import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { FieldError, ValidationResult } from '../src/domain/errors.js';
import { isIp, parseConfig, parseServiceSpec, patchEndpoint, serviceSpecToJson } from '../src/domain/spec.js';

const ep = { address: '10.0.0.1', port: 80 };

function errorsOf<T>(result: ValidationResult<T>): readonly FieldError[] {
  assert.equal(result.ok, false, 'expected validation to fail');
  return result.ok ? [] : result.errors;
}

function valueOf<T>(result: ValidationResult<T>): T {
  if (!result.ok) assert.fail(`expected a valid result, got ${JSON.stringify(result.errors)}`);
  return result.value;
}

describe('parseServiceSpec defaults', () => {
  it('fills every default', () => {
    const spec = valueOf(parseServiceSpec({ name: 'svc', endpoints: [ep] }));
    assert.deepEqual(spec, {
      name: 'svc',
      loadBalancing: {
        mode: 'failover',
        routingPreference: ['region', 'zone', 'subzone'],
        crossNetworkFailover: true,
        overprovisioningFactor: 140,
      },
      endpoints: [
        {
          address: '10.0.0.1',
          port: 80,
          locality: { region: '', zone: '', subzone: '' },
          network: '',
          node: '',
          cluster: '',
          labels: {},
          health: 'healthy',
          weight: 1,
        },
      ],
    });
  });

  it('treats absent endpoints as none and keeps partial localities', () => {
    assert.deepEqual(valueOf(parseServiceSpec({ name: 's' })).endpoints, []);
    const spec = valueOf(parseServiceSpec({ name: 's', endpoints: [{ ...ep, locality: { zone: 'z' } }] }));
    assert.deepEqual(spec.endpoints[0]?.locality, { region: '', zone: 'z', subzone: '' });
  });

  const accepted: [string, unknown][] = [
    ['the longest name', { name: 'a'.repeat(253) }],
    ['a name with . _ -', { name: '9a.b_c-d' }],
    ['the port bounds', { name: 's', port: 65535, endpoints: [{ address: '::1', port: 1 }] }],
    ['the weight bound', { name: 's', endpoints: [{ ...ep, weight: 1_000_000 }] }],
    ['an IPv6 vip', { name: 's', vip: 'fd00::10' }],
    [
      'eight scopes',
      {
        name: 's',
        loadBalancing: {
          routingPreference: ['network', 'region', 'zone', 'subzone', 'node', 'cluster', 'label:a', 'label:b'],
        },
      },
    ],
    ['overprovisioning of exactly 100', { name: 's', loadBalancing: { overprovisioningFactor: 100 } }],
    ['the same address on two ports', { name: 's', endpoints: [ep, { ...ep, port: 81 }] }],
  ];
  for (const [what, input] of accepted) {
    it(`accepts ${what}`, () => {
      valueOf(parseServiceSpec(input));
    });
  }
});

describe('parseServiceSpec errors', () => {
  // [case, input, the exact error paths, a fragment of the first message]
  const rejected: [string, unknown, string[], string][] = [
    ['not an object', [], [''], 'must be an object, got a list'],
    ['missing name', { endpoints: [] }, ['name'], 'must be a string, got nothing'],
    ['name of the wrong type', { name: 7 }, ['name'], 'must be a string, got number 7'],
    ['name starting with -', { name: '-x' }, ['name'], 'must be 1-253 characters'],
    ['name too long', { name: 'a'.repeat(254) }, ['name'], 'must be 1-253 characters'],
    ['name with a slash', { name: 'a/b' }, ['name'], 'got "a/b"'],
    ['unknown field', { name: 's', prot: 1 }, ['prot'], 'unknown field (expected one of: name, port, vip'],
    ['service port', { name: 's', port: 0 }, ['port'], 'must be an integer from 1 to 65535, got number 0'],
    [
      'vip not an IP',
      { name: 's', vip: '10.0.0.300' },
      ['vip'],
      'must be an IPv4 or IPv6 address literal, got "10.0.0.300"',
    ],
    ['loadBalancing not an object', { name: 's', loadBalancing: 'fast' }, ['loadBalancing'], 'must be an object'],
    [
      'loadBalancing unknown field',
      { name: 's', loadBalancing: { moed: 'random' } },
      ['loadBalancing.moed'],
      'unknown field',
    ],
    [
      'mode',
      { name: 's', loadBalancing: { mode: 'nearest' } },
      ['loadBalancing.mode'],
      'must be one of random, failover, strict, got "nearest"',
    ],
    [
      'routingPreference not a list',
      { name: 's', loadBalancing: { routingPreference: 'zone' } },
      ['loadBalancing.routingPreference'],
      'must be a list of scopes',
    ],
    [
      'no scopes',
      { name: 's', loadBalancing: { routingPreference: [] } },
      ['loadBalancing.routingPreference'],
      'must have 1 to 8 scopes, got 0',
    ],
    [
      'nine scopes',
      {
        name: 's',
        loadBalancing: {
          routingPreference: [
            'network',
            'region',
            'zone',
            'subzone',
            'node',
            'cluster',
            'label:a',
            'label:b',
            'label:c',
          ],
        },
      },
      ['loadBalancing.routingPreference'],
      'got 9',
    ],
    [
      'unknown scope',
      { name: 's', loadBalancing: { routingPreference: ['region', 'rack'] } },
      ['loadBalancing.routingPreference[1]'],
      'must be network, region, zone, subzone, node, cluster or label:<key>, got "rack"',
    ],
    [
      'label scope without a key',
      { name: 's', loadBalancing: { routingPreference: ['label:'] } },
      ['loadBalancing.routingPreference[0]'],
      'label:<key>',
    ],
    [
      'duplicate scope',
      { name: 's', loadBalancing: { routingPreference: ['zone', 'region', 'zone'] } },
      ['loadBalancing.routingPreference[2]'],
      'duplicate scope "zone"',
    ],
    [
      'crossNetworkFailover',
      { name: 's', loadBalancing: { crossNetworkFailover: 'yes' } },
      ['loadBalancing.crossNetworkFailover'],
      'must be true or false, got "yes"',
    ],
    [
      'overprovisioning below 100',
      { name: 's', loadBalancing: { overprovisioningFactor: 99 } },
      ['loadBalancing.overprovisioningFactor'],
      'must be an integer from 100',
    ],
    [
      'overprovisioning not an integer',
      { name: 's', loadBalancing: { overprovisioningFactor: 140.5 } },
      ['loadBalancing.overprovisioningFactor'],
      'got number 140.5',
    ],
    [
      'endpoints not a list',
      { name: 's', endpoints: { a: 1 } },
      ['endpoints'],
      'must be a list of endpoints, got an object',
    ],
    ['endpoint not an object', { name: 's', endpoints: ['10.0.0.1:80'] }, ['endpoints[0]'], 'must be an object'],
    [
      'endpoint unknown field',
      { name: 's', endpoints: [{ ...ep, zone: 'z' }] },
      ['endpoints[0].zone'],
      'unknown field',
    ],
    [
      'missing address and port',
      { name: 's', endpoints: [{}] },
      ['endpoints[0].address', 'endpoints[0].port'],
      'got nothing',
    ],
    [
      'neither an address nor a hostname',
      { name: 's', endpoints: [{ address: 'db_1.example.com', port: 80 }] },
      ['endpoints[0].address'],
      'IPv4 or IPv6',
    ],
    [
      'port above 65535',
      { name: 's', endpoints: [{ ...ep, port: 70000 }] },
      ['endpoints[0].port'],
      'must be an integer from 1 to 65535, got number 70000',
    ],
    ['port as a string', { name: 's', endpoints: [{ ...ep, port: '80' }] }, ['endpoints[0].port'], 'got "80"'],
    [
      'locality not an object',
      { name: 's', endpoints: [{ ...ep, locality: 'r/z' }] },
      ['endpoints[0].locality'],
      'must be an object',
    ],
    [
      'locality unknown field',
      { name: 's', endpoints: [{ ...ep, locality: { region: 'r', rack: 'x' } }] },
      ['endpoints[0].locality.rack'],
      'unknown field',
    ],
    [
      'locality value',
      { name: 's', endpoints: [{ ...ep, locality: { zone: 1 } }] },
      ['endpoints[0].locality.zone'],
      'must be a string',
    ],
    [
      'network, node, cluster',
      { name: 's', endpoints: [{ ...ep, network: 1, node: null, cluster: [] }] },
      ['endpoints[0].network', 'endpoints[0].node', 'endpoints[0].cluster'],
      'must be a string',
    ],
    [
      'labels not an object',
      { name: 's', endpoints: [{ ...ep, labels: ['a'] }] },
      ['endpoints[0].labels'],
      'must be an object of string values',
    ],
    [
      'label value',
      { name: 's', endpoints: [{ ...ep, labels: { a: 1 } }] },
      ['endpoints[0].labels.a'],
      'must be a string, got number 1',
    ],
    [
      'empty label key',
      { name: 's', endpoints: [{ ...ep, labels: { '': 'x' } }] },
      ['endpoints[0].labels'],
      'non-empty',
    ],
    [
      'health',
      { name: 's', endpoints: [{ ...ep, health: 'sick' }] },
      ['endpoints[0].health'],
      'must be one of healthy, unhealthy, draining',
    ],
    [
      'weight 0',
      { name: 's', endpoints: [{ ...ep, weight: 0 }] },
      ['endpoints[0].weight'],
      'must be an integer from 1 to 1000000',
    ],
    [
      'weight too large',
      { name: 's', endpoints: [{ ...ep, weight: 1_000_001 }] },
      ['endpoints[0].weight'],
      'got number 1000001',
    ],
    [
      'duplicate endpoint',
      { name: 's', endpoints: [ep, { address: '10.0.0.2', port: 80 }, { ...ep, weight: 2 }] },
      ['endpoints[2]'],
      'duplicate endpoint 10.0.0.1:80',
    ],
    [
      'duplicate IPv6 endpoint',
      {
        name: 's',
        endpoints: [
          { address: 'fd00::1', port: 80 },
          { address: 'fd00::1', port: 80 },
        ],
      },
      ['endpoints[1]'],
      'duplicate endpoint [fd00::1]:80',
    ],
  ];
  for (const [what, input, paths, fragment] of rejected) {
    it(`rejects ${what} at ${paths.join(', ') || '(root)'}`, () => {
      const errors = errorsOf(parseServiceSpec(input));
      assert.deepEqual(
        errors.map((e) => e.path),
        paths,
      );
      assert.ok(errors[0]?.message.includes(fragment), `"${errors[0]?.message}" should include "${fragment}"`);
    });
  }

  it('collects every error, not just the first', () => {
    const errors = errorsOf(
      parseServiceSpec({
        name: 5,
        loadBalancing: { mode: 'x' },
        endpoints: [{ address: 'x y', port: 'y' }, { port: 1 }],
      }),
    );
    assert.deepEqual(
      errors.map((e) => e.path),
      ['name', 'loadBalancing.mode', 'endpoints[0].address', 'endpoints[0].port', 'endpoints[1].address'],
    );
  });

  it('prefixes paths with the given base path', () => {
    const errors = errorsOf(parseServiceSpec({ name: 's', endpoints: [{ ...ep, port: 0 }] }, 'services[3]'));
    assert.deepEqual(
      errors.map((e) => e.path),
      ['services[3].endpoints[0].port'],
    );
  });

  it('shortens long received values', () => {
    const [error] = errorsOf(parseServiceSpec({ name: 's', vip: 'x'.repeat(500) }));
    assert.ok(error && error.message.length < 120, error?.message);
  });
});

describe('serviceSpecToJson', () => {
  const specs: [string, unknown][] = [
    ['a minimal spec', { name: 'svc' }],
    [
      'every field set',
      {
        name: 'svc',
        port: 8080,
        vip: '10.96.0.1',
        loadBalancing: {
          mode: 'strict',
          routingPreference: ['network', 'region', 'label:tier'],
          crossNetworkFailover: false,
          overprovisioningFactor: 200,
        },
        endpoints: [
          {
            address: 'fd00::1',
            port: 80,
            locality: { region: 'r', zone: 'z', subzone: 's' },
            network: 'n1',
            node: 'node-1',
            cluster: 'c1',
            labels: { tier: 'gold' },
            health: 'draining',
            weight: 7,
          },
          { address: '10.0.0.1', port: 80, health: 'unhealthy' },
        ],
      },
    ],
  ];
  for (const [what, input] of specs) {
    it(`round-trips ${what}`, () => {
      const first = valueOf(parseServiceSpec(input));
      const json = serviceSpecToJson(first);
      assert.deepEqual(valueOf(parseServiceSpec(JSON.parse(JSON.stringify(json)))), first);
    });
  }

  it('writes defaults out explicitly', () => {
    assert.deepEqual(serviceSpecToJson(valueOf(parseServiceSpec({ name: 's', endpoints: [ep] }))), {
      name: 's',
      loadBalancing: {
        mode: 'failover',
        routingPreference: ['region', 'zone', 'subzone'],
        crossNetworkFailover: true,
        overprovisioningFactor: 140,
      },
      endpoints: [
        {
          address: '10.0.0.1',
          port: 80,
          locality: { region: '', zone: '', subzone: '' },
          labels: {},
          health: 'healthy',
          weight: 1,
        },
      ],
    });
  });
});

describe('parseConfig', () => {
  it('reads services and server settings, port 0 included', () => {
    const config = valueOf(
      parseConfig({
        server: { host: '::', xdsPort: 0, adminPort: 9000, debounceMs: 10, pushWindow: 64 },
        services: [{ name: 'a' }, { name: 'b' }],
      }),
    );
    assert.deepEqual(config.server, { host: '::', xdsPort: 0, adminPort: 9000, debounceMs: 10, pushWindow: 64 });
    assert.deepEqual(
      config.services.map((s) => s.name),
      ['a', 'b'],
    );
    assert.deepEqual(valueOf(parseConfig({ services: [] })).server, {});
  });

  const rejected: [string, unknown, string[]][] = [
    ['an empty document', null, ['services']],
    ['a list', [], ['']],
    ['services missing', {}, ['services']],
    ['services not a list', { services: { a: {} } }, ['services']],
    ['an unknown top-level key', { services: [], sevrer: {} }, ['sevrer']],
    ['server not an object', { services: [], server: 8080 }, ['server']],
    ['server unknown field', { services: [], server: { port: 1 } }, ['server.port']],
    ['server host', { services: [], server: { host: 1 } }, ['server.host']],
    [
      'server ports',
      { services: [], server: { xdsPort: -1, adminPort: 65536 } },
      ['server.xdsPort', 'server.adminPort'],
    ],
    ['debounce', { services: [], server: { debounceMs: 1.5 } }, ['server.debounceMs']],
    ['push window', { services: [], server: { pushWindow: -1 } }, ['server.pushWindow']],
    ['duplicate names', { services: [{ name: 'a' }, { name: 'b' }, { name: 'a' }] }, ['services[2].name']],
    [
      'a duplicate name on an invalid entry',
      { services: [{ name: 'a' }, { name: 'a', port: 0 }] },
      ['services[1].name', 'services[1].port'],
    ],
    [
      'errors across services and server',
      { server: { xdsPort: -1 }, services: [{ name: 's', endpoints: [{ address: '1.2.3.4', port: 0 }] }, 7] },
      ['services[0].endpoints[0].port', 'services[1]', 'server.xdsPort'],
    ],
  ];
  for (const [what, input, paths] of rejected) {
    it(`rejects ${what} at ${paths.join(', ') || '(root)'}`, () => {
      assert.deepEqual(
        errorsOf(parseConfig(input)).map((e) => e.path),
        paths,
      );
    });
  }

  it('names the duplicate', () => {
    assert.equal(
      errorsOf(parseConfig({ services: [{ name: 'a' }, { name: 'a' }] }))[0]?.message,
      'duplicate service name "a"',
    );
  });
});

describe('patchEndpoint', () => {
  const base = valueOf(parseServiceSpec({ name: 's', endpoints: [{ ...ep, weight: 5, labels: { a: 'b' } }] }))
    .endpoints[0];
  assert.ok(base);

  it('changes health and weight and nothing else', () => {
    assert.deepEqual(valueOf(patchEndpoint(base, { health: 'unhealthy', weight: 3 })), {
      ...base,
      health: 'unhealthy',
      weight: 3,
    });
    assert.deepEqual(valueOf(patchEndpoint(base, {})), base);
  });

  const rejected: [string, unknown, string[]][] = [
    ['no body', undefined, ['']],
    ['other fields', { address: '1.1.1.1', port: 1 }, ['address', 'port']],
    ['bad health and weight', { health: 'meh', weight: 0 }, ['health', 'weight']],
  ];
  for (const [what, input, paths] of rejected) {
    it(`rejects ${what}`, () => {
      assert.deepEqual(
        errorsOf(patchEndpoint(base, input)).map((e) => e.path),
        paths,
      );
    });
  }
});

describe('isIp', () => {
  const cases: [string, boolean][] = [
    ['127.0.0.1', true],
    ['0.0.0.0', true],
    ['255.255.255.255', true],
    ['::', true],
    ['::1', true],
    ['fd00::a:1', true],
    ['2001:db8:0:0:0:0:0:1', true],
    ['1:2:3:4:5:6:7::', true],
    ['::ffff:10.0.0.1', true],
    ['256.0.0.1', false],
    ['01.2.3.4', false],
    ['1.2.3', false],
    ['host', false],
    ['1::2::3', false],
    ['12345::', false],
    ['1:2:3:4:5:6:7:8:9', false],
    ['1:2:3:4:5:6:7', false],
    ['fe80::1%eth0', false],
    ['[::1]', false],
    ['', false],
  ];
  for (const [text, want] of cases) {
    it(`${JSON.stringify(text)} → ${want}`, () => assert.equal(isIp(text), want));
  }
});
