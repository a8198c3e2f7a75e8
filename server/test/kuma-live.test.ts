/**
 * Kuma MeshLoadBalancingStrategies read live (policy/kuma-live.ts and
 * kube/kube-kuma.ts): what each targetRef names, the errors that refuse a
 * Service, and which policy a Service takes. Pure logic, table-driven.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { readLiveStrategy } from '../src/policy/kuma-live.js';
import { MeshStrategies } from '../src/kube/kube-kuma.js';

const to = (targetRef: object, localityAwareness: object = { disabled: true }) => ({
  to: [{ targetRef, default: { localityAwareness } }],
});

describe('MeshLoadBalancingStrategy targetRefs → Services', () => {
  const cases: [string, object, string | undefined][] = [
    ['Mesh: every Service', { kind: 'Mesh' }, '*'],
    ["Kuma's kuma.io/service name", { kind: 'MeshService', name: 'web_shop_svc_8080' }, 'web.shop'],
    ['a MeshService name: the policy namespace', { kind: 'MeshService', name: 'web' }, 'web.apps'],
    ['a MeshService name and namespace', { kind: 'MeshService', name: 'web', namespace: 'shop' }, 'web.shop'],
    [
      'labels',
      { kind: 'MeshService', labels: { 'kuma.io/display-name': 'web', 'k8s.kuma.io/namespace': 'shop' } },
      'web.shop',
    ],
    ['MeshMultiZoneService: not read live', { kind: 'MeshMultiZoneService', name: 'web' }, undefined],
    ['no name', { kind: 'MeshService' }, undefined],
  ];
  for (const [what, ref, key] of cases)
    it(what, () => {
      const r = readLiveStrategy(to(ref), 'apps', 'MeshLoadBalancingStrategy apps/lb');
      assert.deepEqual(
        r.targets.map((t) => t.key),
        key === undefined ? [] : [key],
      );
      if (key === undefined)
        assert.match(r.errors[0]?.path ?? '', /^MeshLoadBalancingStrategy apps\/lb: spec\.to\[0\]/);
      else assert.deepEqual(r.errors, []);
    });

  it('reads localityAwareness by the importer rules: disabled is random; a bad rule is an error at its path', () => {
    const ok = readLiveStrategy(to({ kind: 'Mesh' }), 'apps', 'P');
    assert.equal(ok.targets[0]?.loadBalancing['mode'], 'random');
    const bad = readLiveStrategy(
      to({ kind: 'Mesh' }, { crossZone: { failover: [{ to: { type: 'Sometimes' } }] } }),
      'apps',
      'P',
    );
    assert.deepEqual(
      bad.errors.map((e) => e.path),
      ['P: spec.to[0].default.localityAwareness.crossZone.failover[0].to.type'],
    );
  });
});

describe('which strategy a Service takes', () => {
  const policy = (name: string, created: string, ref: object, la: object) => ({
    metadata: { name, namespace: 'shop', creationTimestamp: new Date(created) },
    spec: to(ref, la),
  });
  it('one naming the Service beats a Mesh one; among equals the oldest; a delete gives the next', () => {
    const s = new MeshStrategies();
    assert.deepEqual(s.change(policy('mesh', '2026-01-01', { kind: 'Mesh' }, { disabled: true }), true), ['*']);
    assert.equal(s.get('web.shop')?.at, 'MeshLoadBalancingStrategy shop/mesh');
    const local = { localZone: {} };
    assert.deepEqual(s.change(policy('new', '2026-03-01', { kind: 'MeshService', name: 'web' }, local), true), [
      'web.shop',
    ]);
    s.change(policy('old', '2026-02-01', { kind: 'MeshService', name: 'web' }, local), true);
    assert.equal(s.get('web.shop')?.at, 'MeshLoadBalancingStrategy shop/old');
    assert.equal(s.get('api.shop')?.at, 'MeshLoadBalancingStrategy shop/mesh');
    s.change(policy('old', '2026-02-01', { kind: 'MeshService', name: 'web' }, local), false);
    assert.equal(s.get('web.shop')?.at, 'MeshLoadBalancingStrategy shop/new');
    assert.deepEqual(s.change(policy('mesh', '2026-01-01', { kind: 'Mesh' }, {}), false), ['*']);
    assert.equal(s.get('api.shop'), undefined);
  });
});
