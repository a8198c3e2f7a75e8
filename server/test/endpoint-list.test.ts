/** The compiled fast path for endpoint lists: it builds what the field-by-field reader builds, and refuses the rest. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { readValidEndpointList } from '../src/domain/endpoint-list.js';
import { parseServiceSpec } from '../src/domain/spec.js';

const full = {
  address: 'fd00::1',
  port: 8080,
  locality: { region: 'r1', zone: 'z1' },
  network: 'n1',
  node: 'node-1',
  cluster: 'c1',
  labels: { version: 'v2' },
  health: 'draining',
  weight: 7,
};

describe('readValidEndpointList', () => {
  it('builds every field and default as the service reader documents them', () => {
    assert.deepEqual(readValidEndpointList([full, { address: '10.0.0.1', port: 80 }]), [
      { ...full, locality: { region: 'r1', zone: 'z1', subzone: '' } },
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
    ]);
  });

  it('keeps "__proto__" as a label, not a prototype', () => {
    const [ep] =
      readValidEndpointList(JSON.parse('[{"address":"10.0.0.1","port":80,"labels":{"__proto__":"x"}}]')) ?? [];
    assert.equal(Object.getPrototypeOf(ep?.labels), Object.prototype);
    assert.deepEqual(Object.entries(ep?.labels ?? {}), [['__proto__', 'x']]);
  });

  // Each is refused by the fast path and then reported by the reader with its field path.
  const refused: [string, unknown, string][] = [
    ['not a list', { address: '10.0.0.1' }, 'endpoints'],
    ['a bad address', [{ address: '10.0.0.256', port: 80 }], 'endpoints[0].address'],
    ['a name with an underscore', [{ address: 'db_1.local', port: 80 }], 'endpoints[0].address'],
    ['a missing port', [{ address: '10.0.0.1' }], 'endpoints[0].port'],
    ['port 65536', [{ address: '10.0.0.1', port: 65536 }], 'endpoints[0].port'],
    ['a fractional weight', [{ address: '10.0.0.1', port: 80, weight: 1.5 }], 'endpoints[0].weight'],
    ['weight 0', [{ address: '10.0.0.1', port: 80, weight: 0 }], 'endpoints[0].weight'],
    ['an unknown field', [{ address: '10.0.0.1', port: 80, zone: 'z' }], 'endpoints[0].zone'],
    [
      'an unknown locality field',
      [{ address: '10.0.0.1', port: 80, locality: { rack: 'a' } }],
      'endpoints[0].locality.rack',
    ],
    ['an unknown health', [{ address: '10.0.0.1', port: 80, health: 'ok' }], 'endpoints[0].health'],
    ['a number label', [{ address: '10.0.0.1', port: 80, labels: { v: 1 } }], 'endpoints[0].labels.v'],
    ['an empty label key', [{ address: '10.0.0.1', port: 80, labels: { '': 'x' } }], 'endpoints[0].labels'],
    ['a null entry', [null], 'endpoints[0]'],
    [
      'a duplicate',
      [
        { address: '10.0.0.1', port: 80 },
        { address: '10.0.0.1', port: 80 },
      ],
      'endpoints[1]',
    ],
  ];
  for (const [what, endpoints, path] of refused) {
    it(`refuses ${what}; the reader reports ${path}`, () => {
      assert.equal(readValidEndpointList(endpoints), undefined);
      const r = parseServiceSpec({ name: 's', endpoints });
      assert.equal(r.ok, false);
      assert.deepEqual(r.ok ? [] : r.errors.map((e) => e.path), [path]);
    });
  }
});
