/**
 * Dual-stack services: `vips` in a spec (one VIP per family), and the node
 * agent's trees for them — one LocalityTree per VIP, each with its family's
 * backends.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import protobuf from 'protobufjs';
import type { FieldError, ValidationResult } from '../src/domain/errors.js';
import { Mesh } from '../src/domain/mesh.js';
import { parseConfig, parseServiceSpec, serviceSpecToJson } from '../src/domain/spec.js';
import { localityTreeType } from '../src/resources/locality-tree.js';
import type { ResourceType } from '../src/resources/resource-type.js';
import { decodeLocalityTree, intToIpv4, ipv6String, type TreeMessage } from '../src/resources/tree-codec.js';

function valueOf<T>(result: ValidationResult<T>): T {
  if (!result.ok) assert.fail(`expected a valid result, got ${JSON.stringify(result.errors)}`);
  return result.value;
}

function errorsOf<T>(result: ValidationResult<T>): readonly FieldError[] {
  assert.equal(result.ok, false, 'expected validation to fail');
  return result.ok ? [] : result.errors;
}

/** The LocalityTree inside a resource's google.protobuf.Any. */
function treeOf(type: ResourceType, name: string): TreeMessage {
  const resource = type.resolve(name, undefined as never);
  assert.ok(resource, `a ${name} tree`);
  const rd = protobuf.Reader.create(resource.any as Uint8Array);
  while (rd.pos < rd.len) {
    const tag = rd.uint32();
    if (tag >>> 3 === 2) return decodeLocalityTree(rd.bytes());
    rd.skipType(tag & 7);
  }
  throw new Error('no value in the Any');
}

const endpoints = [
  { address: '10.0.0.1', port: 80, locality: { region: 'r1', zone: 'z1' } },
  { address: 'fd00::1', port: 80, locality: { region: 'r1', zone: 'z1' } },
  { address: '10.0.0.2', port: 80, locality: { region: 'r2', zone: 'z1' } },
  { address: 'fd00::2', port: 80, locality: { region: 'r2', zone: 'z1' }, weight: 3 },
  { address: 'fd00::3', port: 80, locality: { region: 'r2', zone: 'z2' } },
];

describe('vips', () => {
  it('takes one VIP per family, the first the primary vip, and round-trips it', () => {
    const spec = valueOf(parseServiceSpec({ name: 's', port: 80, vips: ['FD00:C::10', '10.96.0.10'] }));
    assert.equal(spec.vip, 'fd00:c::10');
    assert.deepEqual(spec.vips, ['fd00:c::10', '10.96.0.10']);
    const json = JSON.parse(JSON.stringify(serviceSpecToJson(spec)));
    assert.deepEqual(json.vips, ['fd00:c::10', '10.96.0.10']);
    assert.deepEqual(valueOf(parseServiceSpec(json)), spec);
  });

  it('reads vip alone, vips of one, and vip with the vips it heads, the same way', () => {
    const one = valueOf(parseServiceSpec({ name: 's', vip: '10.96.0.10' }));
    assert.equal(one.vips, undefined);
    assert.deepEqual(valueOf(parseServiceSpec({ name: 's', vips: ['10.96.0.10'] })), one);
    const both = { name: 's', vip: '10.96.0.10', vips: ['10.96.0.10', 'fd00:c::10'] };
    assert.deepEqual(valueOf(parseServiceSpec(both)).vips, ['10.96.0.10', 'fd00:c::10']);
  });

  const rejected: [string, unknown, string, string][] = [
    ['two of one family', { vips: ['10.96.0.10', '10.96.0.11'] }, 'vips[1]', 'other family than 10.96.0.10'],
    ['two IPv6', { vips: ['fd00::10', 'fd00::11'] }, 'vips[1]', 'at most one VIP per family'],
    ['a bad address', { vips: ['10.96.0.10', 'fd00::zz'] }, 'vips[1]', 'must be an IPv4 or IPv6 address'],
    ['an unusable address', { vips: ['0.0.0.0'] }, 'vips[0]', 'must be a unicast address'],
    ['not a list', { vips: '10.96.0.10' }, 'vips', 'a list of one or two addresses'],
    ['three', { vips: ['10.96.0.10', 'fd00::10', '10.96.0.11'] }, 'vips', 'a list of one or two'],
    ['none', { vips: [] }, 'vips', 'a list of one or two'],
    ['vip and vips disagreeing', { vip: 'fd00::10', vips: ['10.96.0.10', 'fd00::10'] }, 'vip', 'the first of vips'],
  ];
  for (const [what, input, path, fragment] of rejected) {
    it(`rejects ${what} at ${path}`, () => {
      const errors = errorsOf(parseServiceSpec({ name: 's', ...(input as object) }, 'services[2]'));
      assert.deepEqual(
        errors.map((e) => e.path),
        [`services[2].${path}`],
      );
      assert.ok(errors[0]!.message.includes(fragment), `"${errors[0]!.message}" should include "${fragment}"`);
    });
  }
  it('refuses two services sharing a secondary VIP and port, at the field of the later', () => {
    const errors = errorsOf(
      parseConfig({
        services: [
          { name: 'a', port: 80, vips: ['10.96.0.10', 'fd00:c::10'] },
          { name: 'b', port: 80, vips: ['10.96.0.11', 'fd00:c::10'] },
        ],
      }),
    );
    assert.deepEqual(
      errors.map((e) => e.path),
      ['services[1].vips'],
    );
    assert.match(errors[0]!.message, /fd00:c::10:80 is also service "a"'s/);
  });
});

describe('LocalityTree of a dual-stack service', () => {
  it('is one tree per VIP, each with its family backends and the whole locality structure', () => {
    const mesh = new Mesh();
    mesh.put(valueOf(parseServiceSpec({ name: 'web', port: 80, vips: ['10.96.0.10', 'fd00:c::10'], endpoints })));
    const type = localityTreeType(mesh);
    assert.deepEqual([...type.names()], ['web', 'web#ipv6']);
    const v4 = treeOf(type, 'web');
    const v6 = treeOf(type, 'web#ipv6');
    assert.equal(v4.service, 'web');
    assert.equal(v6.service, 'web', 'both trees are the one service');
    assert.equal(intToIpv4(v4.vip), '10.96.0.10');
    assert.equal(v4.vip6, undefined);
    assert.equal(ipv6String(v6.vip6!), 'fd00:c::10');
    assert.deepEqual(
      v4.backends.map((b) => intToIpv4(b.ipv4)),
      ['10.0.0.1', '10.0.0.2'],
    );
    assert.deepEqual(
      v6.backends.map((b) => [ipv6String(b.ipv6!), b.weight]),
      [
        ['fd00::1', 1],
        ['fd00::2', 3],
        ['fd00::3', 1],
      ],
    );
    // The same nodes, each range over its own family's backends: r2/z2 has no IPv4 backend.
    assert.deepEqual(
      v4.nodes.map((n) => n.value),
      v6.nodes.map((n) => n.value),
    );
    const range = (t: TreeMessage, value: string) =>
      t.nodes.filter((n) => n.value === value).map((n) => n.end - n.start);
    assert.deepEqual(range(v4, 'z2'), [0]);
    assert.deepEqual(range(v6, 'z2'), [1]);
    assert.equal(type.resolve('web#ipv4', undefined as never), undefined, 'no tree for a family the service lacks');
  });

  it('names the secondary tree after its family, and drops it when the service is single-stack again', () => {
    const mesh = new Mesh();
    mesh.put(valueOf(parseServiceSpec({ name: 'web', port: 80, vips: ['fd00:c::10', '10.96.0.10'], endpoints })));
    const type = localityTreeType(mesh);
    assert.deepEqual([...type.names()], ['web', 'web#ipv4']);
    assert.equal(ipv6String(treeOf(type, 'web').vip6!), 'fd00:c::10');
    assert.equal(intToIpv4(treeOf(type, 'web#ipv4').vip), '10.96.0.10');
    assert.ok([...type.touchedBy(new Set(['web']))].includes('web#ipv4'));
    mesh.put(valueOf(parseServiceSpec({ name: 'web', port: 80, vip: 'fd00:c::10', endpoints })));
    assert.deepEqual([...type.names()], ['web']);
    assert.equal(type.resolve('web#ipv4', undefined as never), undefined);
  });
});
