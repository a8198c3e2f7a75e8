/**
 * CLAs as ropes over the tree. The server's cache keeps span CLAs across
 * endpoint changes and reads their bytes through the tree when sent. These
 * tests check the rope against an independent encoding of the same content
 * (a fresh mesh, contiguous group-by-group bytes, decoded by protobufjs), over
 * a random sequence of adds, removes, health flips and weight changes.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ClaCache } from '../src/domain/cla-cache.js';
import { buildCla } from '../src/domain/cla.js';
import { Mesh, type ServiceState } from '../src/domain/mesh.js';
import { planFor } from '../src/domain/priorities.js';
import type { Endpoint, LbMode } from '../src/domain/service.js';
import { serverClaCache } from '../src/resources/endpoint/endpoint.js';
import { encodeCla } from '../src/resources/endpoint/endpoint-codec.js';
import { encodeRunBody, groupBody } from '../src/resources/endpoint/endpoint-parts.js';
import { messageType } from '../src/wire/protos.js';
import { encodeAny, encodeDiscoveryResponse } from '../src/wire/envelope.js';
import { makeResource } from '../src/resources/resource.js';
import { flatten, isRope } from '../src/wire/rope.js';
import { ENDPOINT_TYPE } from '../src/resources/type-urls.js';
import { client, ep, lb, service } from './support/builders.js';
import { pgvCheckBytes } from './support/pgv.js';

const CLA_MESSAGE = 'envoy.config.endpoint.v3.ClusterLoadAssignment';

/** A deterministic PRNG, so a failure replays. */
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

const LOCALITIES: readonly string[] = ['r1/z1/s1', 'r1/z1/s2', 'r1/z2/s1', 'r2/z1/s1', 'r2/z3/s3', 'r3/z1/s1'];
function pick(i: number): string {
  return LOCALITIES[i % LOCALITIES.length] as string;
}

const CLIENTS = ['r1/z1/s1', 'r1/z1/s9', 'r1/z2/s1', 'r2/z3/s3', 'r9/z9/s9', 'r3/z1/s1'].map((l) =>
  client({ locality: l }),
);

/** The CLA of the same content, built from scratch and encoded group by group. */
function independent(endpoints: readonly Endpoint[], at: (typeof CLIENTS)[number], mode: LbMode): Buffer {
  const mesh = new Mesh();
  mesh.put(service('svc', endpoints, lb(mode)));
  const s = mesh.get('svc') as ServiceState;
  const cla = buildCla('svc', s.tree, s.spec.loadBalancing, planFor(s.tree, s.spec.loadBalancing, at));
  // Reading `groups` (not `spans`) takes the contiguous group-by-group path.
  return Buffer.from(encodeCla({ clusterName: cla.clusterName, groups: cla.groups, overprovisioningFactor: 140 }));
}

describe('CLA ropes', () => {
  for (const mode of ['failover', 'strict', 'random'] as const) {
    it(`${mode}: match an independent encoding after every change, and keep entries while the shape holds`, () => {
      const random = rng(7);
      let endpoints: Endpoint[] = [];
      for (let i = 0; i < 60; i++) endpoints.push(ep({ locality: pick(i) }));
      const mesh = new Mesh();
      mesh.put(service('svc', endpoints, lb(mode)));
      const cache = serverClaCache();
      const state = () => mesh.get('svc') as ServiceState;
      for (const c of CLIENTS) cache.lookup(state(), c);
      let keptChanges = 0;
      for (let step = 0; step < 200; step++) {
        const i = Math.floor(random() * endpoints.length);
        const e = endpoints[i] as Endpoint;
        const op = Math.floor(random() * 4);
        if (op === 0) endpoints = [...endpoints, ep({ locality: pick(Math.floor(random() * LOCALITIES.length)) })];
        else if (op === 1 && endpoints.length > 10) endpoints = endpoints.filter((_, k) => k !== i);
        else if (op === 2)
          endpoints = endpoints.map((x, k) =>
            k === i ? { ...e, health: e.health === 'healthy' ? 'unhealthy' : 'healthy' } : x,
          );
        else endpoints = endpoints.map((x, k) => (k === i ? { ...e, weight: 1 + Math.floor(random() * 5) } : x));
        const shape = state().tree.shape;
        const before = CLIENTS.map((c) => cache.lookup(state(), c));
        mesh.put(service('svc', endpoints, lb(mode)));
        const after = CLIENTS.map((c) => cache.lookup(state(), c));
        if (state().tree.shape === shape) {
          keptChanges++;
          after.forEach((entry, k) => assert.equal(entry, before[k], `step ${step}: entry kept while the shape holds`));
        }
        CLIENTS.forEach((c, k) => {
          const entry = after[k]!;
          assert.ok(isRope(entry.bytes), 'a region/zone/subzone CLA is a rope');
          assert.deepEqual(
            Buffer.from(flatten(entry.bytes)),
            independent(endpoints, c, mode),
            `step ${step}, client ${k}`,
          );
          // Envoy's own validation rules, on a sample of the steps (the walker is slow).
          if (step % 10 === 0) assert.deepEqual(pgvCheckBytes(CLA_MESSAGE, flatten(entry.bytes)), [], `step ${step}`);
        });
      }
      assert.ok(keptChanges > 50, `${keptChanges} changes kept every entry`);
      assert.ok(cache.stats().kept > 0);
    });
  }

  it('versions by content: a change moves the hash, undoing it brings the hash back', () => {
    const endpoints = LOCALITIES.flatMap((l) => [ep({ locality: l }), ep({ locality: l })]);
    const mesh = new Mesh();
    mesh.put(service('svc', endpoints));
    const cache = serverClaCache();
    const s = () => mesh.get('svc') as ServiceState;
    const r = makeResource('svc', ENDPOINT_TYPE, cache.lookup(s(), CLIENTS[0]!).bytes);
    const h0 = r.hash;
    const other = makeResource('svc', ENDPOINT_TYPE, cache.lookup(s(), CLIENTS[3]!).bytes);
    assert.notEqual(other.hash, h0, 'two clients with different CLAs');
    // Far from the client (another region): still in its CLA at a lower priority.
    const far = endpoints.findIndex((e) => e.locality.region === 'r3');
    mesh.put(
      service(
        'svc',
        endpoints.map((e, k) => (k === far ? { ...e, weight: 7 } : e)),
      ),
    );
    const h1 = r.hash;
    assert.notEqual(h1, h0);
    mesh.put(service('svc', endpoints));
    assert.equal(r.hash, h0, 'same content, same version');
    // The resource's Any is the rope's bytes wrapped as encodeAny would.
    const entry = cache.lookup(s(), CLIENTS[0]!);
    assert.deepEqual(Buffer.from(flatten(r.any)), Buffer.from(encodeAny(ENDPOINT_TYPE, flatten(entry.bytes))));
  });

  it('are copied into a DiscoveryResponse exactly as their flattened bytes', () => {
    const endpoints = Array.from({ length: 300 }, (_, i) => ep({ locality: pick(i) }));
    const mesh = new Mesh();
    mesh.put(service('svc', endpoints));
    const cache = serverClaCache();
    const resources = CLIENTS.map((c) => makeResource('svc', ENDPOINT_TYPE, cache.lookup(mesh.get('svc')!, c).bytes));
    const envelope = { versionInfo: 'v', typeUrl: ENDPOINT_TYPE, nonce: '1' };
    const viaRopes = encodeDiscoveryResponse({ ...envelope, resources: resources.map((r) => r.any) });
    const viaFlat = encodeDiscoveryResponse({ ...envelope, resources: resources.map((r) => flatten(r.any)) });
    assert.ok(viaRopes.length > 300 * 20);
    assert.deepEqual(viaRopes, viaFlat);
  });

  it('a cache without live spans drops every entry on a change', () => {
    const endpoints = LOCALITIES.flatMap((l) => [ep({ locality: l }), ep({ locality: l })]);
    const mesh = new Mesh();
    mesh.put(service('svc', endpoints));
    const cache = new ClaCache(encodeCla);
    const a = cache.lookup(mesh.get('svc')!, CLIENTS[0]!);
    mesh.put(
      service(
        'svc',
        endpoints.map((e, k) => (k === 0 ? { ...e, weight: 3 } : e)),
      ),
    );
    const b = cache.lookup(mesh.get('svc')!, CLIENTS[0]!);
    assert.notEqual(a, b);
    assert.equal(cache.stats().kept, 0);
    assert.notDeepEqual(Buffer.from(a.bytes), Buffer.from(b.bytes));
  });
});

describe('leaf bodies written in place', () => {
  const HOSTS = [
    (r: () => number) => `10.${Math.floor(r() * 256)}.${Math.floor(r() * 256)}.${Math.floor(r() * 256)}`,
    (r: () => number) => `fd00::${Math.floor(r() * 65536).toString(16)}`,
    (r: () => number) => `svc-${Math.floor(r() * 1e6)}.example.internal`,
    // Not ASCII: these take the per-endpoint UTF-8 path inside the same body.
    (r: () => number) => `bücher-${Math.floor(r() * 100)}.example`,
    (r: () => number) => `節點${Math.floor(r() * 100)}.例え`,
  ];
  const WEIGHTS = [1, 1, 1, 0, 2, 127, 128, 300, 16_384, 2 ** 31 - 1];

  it('equal the body built from each endpoint’s own field, and decode to the same endpoints', () => {
    const random = rng(11);
    const at = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)] as T;
    const LocalityLbEndpoints = messageType('envoy.config.endpoint.v3.LocalityLbEndpoints');
    for (let trial = 0; trial < 400; trial++) {
      const locality = at(['r1/z1/s1', 'r2//s', 'r3/z3', '', 'région/zone/sous-zone']);
      const run = Array.from({ length: 1 + Math.floor(random() * 12) }, () =>
        ep({ address: at(HOSTS)(random), port: Math.floor(random() * 65536), weight: at(WEIGHTS), locality }),
      );
      // A sum past uint32 is clamped on both paths.
      const weight = trial % 50 === 0 ? 2 ** 32 + 7 : run.reduce((n, e) => n + e.weight, 0);
      const first = run[0]!;
      const inPlace = encodeRunBody(first.locality, weight, run);
      const byParts = groupBody({ locality: first.locality, priority: 0, weight, endpoints: run });
      assert.deepEqual(Buffer.from(inPlace), Buffer.from(byParts), `trial ${trial}`);
      const decoded = LocalityLbEndpoints.toObject(LocalityLbEndpoints.decode(inPlace)) as {
        lb_endpoints: { endpoint: { address: { socket_address: { address: string; port_value?: number } } } }[];
      };
      assert.deepEqual(
        decoded.lb_endpoints.map((l) => {
          const a = l.endpoint.address.socket_address;
          return [a.address, a.port_value ?? 0];
        }),
        run.map((e) => [e.address, e.port]),
      );
    }
  });
});
