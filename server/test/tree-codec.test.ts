import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Mesh } from '../src/domain/mesh.js';
import {
  backendWireSize,
  decodeLocalityTree,
  encodeLocalityTree,
  intToIpv4,
  ipv4ToInt,
  ipv6Bytes,
  ipv6String,
} from '../src/resources/tree-codec.js';
import { ep, lb, service } from './support/builders.js';

function compiled(spec: ReturnType<typeof service>) {
  const mesh = new Mesh();
  mesh.put(spec);
  const s = mesh.get(spec.name)!;
  return { spec: s.spec, tree: s.tree.compile() };
}

describe('LocalityTree codec', () => {
  it('round-trips the compiled tree through the .proto schema', () => {
    const spec = {
      ...service(
        'web',
        [ep({ locality: 'r1/z1/s1', weight: 3 }), ep({ locality: 'r1/z2/s1' }), ep({ locality: 'r2/z1/s1' })],
        lb('strict'),
      ),
      vip: '10.96.0.10',
      port: 80,
    };
    const { tree } = compiled(spec);
    const msg = decodeLocalityTree(encodeLocalityTree(spec, tree));
    assert.equal(msg.service, 'web');
    assert.equal(intToIpv4(msg.vip), '10.96.0.10');
    assert.equal(msg.port, 80);
    assert.equal(msg.mode, 'strict');
    assert.deepEqual(msg.scopes, ['region', 'zone', 'subzone']);
    assert.deepEqual(
      msg.nodes.map((n) => [n.parent, n.value, n.start, n.end]),
      tree.nodes.map((n) => [Math.max(0, n.parent), n.value, n.start, n.end]),
    );
    assert.deepEqual(
      msg.backends.map((b) => [intToIpv4(b.ipv4), b.port, b.weight]),
      tree.endpoints.map((e) => [e.address, e.port, e.weight]),
    );
  });

  it('leaves out IPv6 backends and renumbers every range around them', () => {
    const spec = {
      ...service('web', [
        ep({ locality: 'r1/z1/s1', address: 'fd00::1' }),
        ep({ locality: 'r1/z1/s1' }),
        ep({ locality: 'r2/z1/s1', address: 'fd00::2' }),
        ep({ locality: 'r3/z1/s1' }),
      ]),
      vip: '10.96.0.10',
      port: 80,
    };
    const msg = decodeLocalityTree(encodeLocalityTree(spec, compiled(spec).tree));
    assert.equal(msg.backends.length, 2);
    const r2 = msg.nodes.find((n) => n.value === 'r2')!;
    assert.equal(r2.end - r2.start, 0, 'r2 only had an IPv6 backend: an empty range');
    assert.deepEqual([msg.nodes[0]!.start, msg.nodes[0]!.end], [0, 2]);
  });

  it('refuses a service without an IP VIP and port', () => {
    const spec = { ...service('web', [ep()]), vip: 'web.internal', port: 80 };
    assert.throws(() => encodeLocalityTree(spec, compiled(spec).tree), /needs an IPv4 or IPv6 vip and a port/);
  });

  it('carries an IPv6 service: the VIP and its IPv6 backends, IPv4 ones left out', () => {
    const spec = {
      ...service('web6', [
        ep({ locality: 'r1/z1/s1', address: 'fd00::1' }),
        ep({ locality: 'r1/z1/s1' }),
        ep({ locality: 'r2/z1/s1', address: 'fd00::2', weight: 2 }),
      ]),
      vip: 'fd00:c::100',
      port: 80,
    };
    const msg = decodeLocalityTree(encodeLocalityTree(spec, compiled(spec).tree));
    assert.equal(ipv6String(msg.vip6!), 'fd00:c::100');
    assert.equal(msg.vip, 0);
    assert.deepEqual(
      msg.backends.map((b) => [ipv6String(b.ipv6!), b.port, b.weight]),
      [
        ['fd00::1', 80, 1],
        ['fd00::2', 80, 2],
      ].map(([a, , w]) => [a, msg.backends[0]!.port, w]),
    );
    assert.deepEqual([msg.nodes[0]!.start, msg.nodes[0]!.end], [0, 2]);
    assert.equal(ipv6Bytes('::ffff:10.0.0.1'), undefined, 'an IPv4-mapped address is IPv4');
  });

  it('rejects malformed trees with the field at fault', () => {
    const spec = { ...service('web', [ep({ locality: 'r1/z1/s1' })]), vip: '10.0.0.1', port: 80 };
    const good = encodeLocalityTree(spec, compiled(spec).tree);
    assert.doesNotThrow(() => decodeLocalityTree(good));
    // Truncate the last backend away: the root range now points past the end.
    const cut = good.subarray(0, good.length - 10);
    assert.throws(() => decodeLocalityTree(cut), /range \[0, 1\) is outside backends\[0, 0\)/);
  });

  it('costs at most 10 bytes per backend on the wire (ports >= 128 take 2 varint bytes)', () => {
    assert.equal(backendWireSize(8080), 10);
    assert.equal(backendWireSize(80), 9);
    const eps = Array.from({ length: 1000 }, () => ep({ locality: 'r1/z1/s1' }));
    const spec = { ...service('web', eps), vip: '10.0.0.1', port: 80 };
    const bytes = encodeLocalityTree(spec, compiled(spec).tree);
    assert.ok(bytes.length / 1000 <= 10.1, `${bytes.length / 1000} B per backend`);
  });

  it('parses dotted IPv4 strictly', () => {
    assert.equal(ipv4ToInt('255.255.255.255'), 0xffffffff);
    assert.equal(intToIpv4(ipv4ToInt('10.1.2.3')!), '10.1.2.3');
    for (const bad of ['10.1.2', '10.1.2.256', '10.1.2.3.4', 'a.b.c.d', '::1', '1.2.3.-4'])
      assert.equal(ipv4ToInt(bad), undefined, bad);
  });
});
