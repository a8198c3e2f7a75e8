/**
 * Issue 22's importer cases, with documents as Istio, Kuma and Kubernetes
 * users write them: what is imported, what is noted, what is refused (with
 * the source document's field path).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { importDocuments, type PolicySystem } from '../src/policy/import.js';

function imp(system: PolicySystem | undefined, text: string) {
  return importDocuments([{ name: 'in.yaml', text }], system);
}

function ok(r: ReturnType<typeof imp>) {
  assert.ok(r.result.ok, JSON.stringify(!r.result.ok && r.result.errors));
  return r.result.value;
}

function errorsOf(r: ReturnType<typeof imp>) {
  assert.ok(!r.result.ok, 'should fail');
  return r.result.errors;
}

const se = (annotations: string, extra = '') => `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata:
  name: ratings
  namespace: shop
  annotations: {${annotations}}
spec:
  hosts: [ratings.shop]
  ports: [{ number: 80, name: http }]
  endpoints:
    - { address: 10.0.0.1, locality: r1/z1 }
    - { address: 10.0.0.2, locality: r2/z1 }
${extra}`;

describe('Istio traffic-distribution annotation, and nothing silently dropped', () => {
  it('ServiceEntry PreferClose / PreferSameNode: failoverPriority on network, region, zone (…, subzone, node), no outlierDetection needed', () => {
    const zone = ok(imp('istio', se('networking.istio.io/traffic-distribution: PreferClose'))).services[0]!;
    assert.deepEqual(zone.loadBalancing.policy?.failoverPriority, [
      { scope: 'network' },
      { scope: 'region' },
      { scope: 'zone' },
    ]);
    const node = ok(imp('istio', se('networking.istio.io/traffic-distribution: prefersamenode'))).services[0]!;
    assert.deepEqual(
      node.loadBalancing.policy?.failoverPriority?.map((l) => l.scope),
      ['network', 'region', 'zone', 'subzone', 'node'],
    );
  });

  it('a DestinationRule localityLbSetting wins over the annotation; enabled: false turns it off', () => {
    const dr = (setting: string) => `---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: { name: ratings }
spec:
  host: ratings.shop
  trafficPolicy: { loadBalancer: { localityLbSetting: ${setting} } }
`;
    const off = ok(imp('istio', se('networking.istio.io/traffic-distribution: PreferClose', dr('{ enabled: false }'))));
    assert.equal(off.services[0]!.loadBalancing.policy, undefined);
    // A rule without localityLbSetting: the annotation applies.
    const plain = ok(
      imp(
        'istio',
        se('networking.istio.io/traffic-distribution: PreferClose') +
          dr('{ }').replace('trafficPolicy: { loadBalancer: { localityLbSetting: { } } }', 'trafficPolicy: {}'),
      ),
    );
    assert.ok(plain.services[0]!.loadBalancing.policy?.failoverPriority);
  });

  it('unknown annotations and an unknown traffic distribution are noted; unknown metadata fields are errors', () => {
    const r = imp('istio', se('networking.istio.io/traffic-distribution: Anywhere, example.com/owner: team-a'));
    const notes = r.notes.map((n) => n.path);
    assert.ok(
      notes.includes('in.yaml[0].metadata.annotations["networking.istio.io/traffic-distribution"]'),
      notes.join(),
    );
    assert.ok(notes.includes('in.yaml[0].metadata.annotations["example.com/owner"]'), notes.join());
    const bad = errorsOf(imp('istio', se('').replace('  namespace: shop', '  namespce: shop')));
    assert.ok(bad.some((e) => e.path === 'in.yaml[0].metadata.namespce'));
  });

  it('a Kubernetes Service with the Istio annotation: imported as trafficDistribution, with a note', () => {
    const r = imp(
      'k8s',
      `apiVersion: v1
kind: Service
metadata: { name: web, annotations: { networking.istio.io/traffic-distribution: PreferClose } }
spec: { ports: [{ port: 80 }] }
`,
    );
    assert.equal(ok(r).services[0]!.loadBalancing.policy?.trafficDistribution, 'PreferSameZone');
    assert.ok(r.notes.some((n) => n.path.endsWith('["networking.istio.io/traffic-distribution"]')));
  });

  it('EndpointSlice conditions: serving + terminating is terminating; unknown condition keys are errors', () => {
    const slice = (conditions: string) => `apiVersion: v1
kind: Service
metadata: { name: web }
spec: { ports: [{ port: 80 }] }
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { name: web-1, labels: { kubernetes.io/service-name: web } }
addressType: IPv4
ports: [{ port: 8080 }]
endpoints:
  - { addresses: [10.0.0.1], conditions: ${conditions} }
`;
    const t = ok(imp('k8s', slice('{ ready: false, serving: true, terminating: true }')));
    assert.equal(t.services[0]!.endpoints[0]!.health, 'terminating');
    const u = ok(imp('k8s', slice('{ ready: false, serving: false, terminating: true }')));
    assert.equal(u.services[0]!.endpoints[0]!.health, 'unhealthy');
    assert.ok(
      errorsOf(imp('k8s', slice('{ redy: true }'))).some((e) => e.path === 'in.yaml[1].endpoints[0].conditions.redy'),
    );
  });
});

describe('Istio zoneAwareLbSetting', () => {
  const dr = (setting: string) => `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: { name: ratings }
spec:
  host: ratings
  trafficPolicy:
    loadBalancer:
      zoneAwareLbSetting: ${setting}
      localityLbSetting: { enabled: true }
`;
  it('is region tiers, failover regions and failoverPriority labels, and Envoy zone-aware routing', () => {
    const r = imp(
      'istio',
      dr('{ enabled: true, minClusterSize: 3, failover: [{ from: r1, to: r2 }], failoverPriority: [version] }'),
    );
    const lb = ok(r).services[0]!.loadBalancing;
    assert.deepEqual(lb.routingPreference, ['region']);
    assert.equal(lb.mode, 'failover');
    assert.deepEqual(lb.policy?.failoverPriority, [{ scope: 'label:version' }]);
    assert.deepEqual(lb.policy?.failover?.rules, [{ from: ['r1'], to: { type: 'only', values: ['r2'] } }]);
    assert.deepEqual(lb.policy?.zoneAware, { enabled: true, minClusterSize: 3 });
    const notes = r.notes.map((n) => `${n.path}: ${n.message}`).join('\n');
    assert.match(
      notes,
      /zoneAwareLbSetting: Envoy sidecars get zone-aware routing .*min_cluster_size 3.*local_cluster/,
    );
    assert.match(notes, /localityLbSetting: not imported: zoneAwareLbSetting takes precedence/);
  });
  it('enabled: false: routing 0% for Envoy and every endpoint at priority 0, as Istio (no region tiers)', () => {
    const lb = ok(imp('istio', dr('{ enabled: false, failover: [{ from: r1, to: r2 }] }'))).services[0]!.loadBalancing;
    assert.equal(lb.mode, 'random');
    assert.deepEqual(lb.policy, { zoneAware: { enabled: false } });
  });
  it('refuses region/zone/subzone in failoverPriority and bad fields, at their path', () => {
    const paths = errorsOf(
      imp(
        'istio',
        dr('{ enabled: yes, minClusterSize: -1, failoverPriority: [topology.kubernetes.io/zone], extra: 1 }'),
      ),
    ).map((e) => e.path);
    for (const p of ['enabled', 'minClusterSize', 'failoverPriority[0]', 'extra'])
      assert.ok(
        paths.includes(`in.yaml[0].spec.trafficPolicy.loadBalancer.zoneAwareLbSetting.${p}`),
        `${p}: ${paths.join(', ')}`,
      );
  });
});

describe('validation parity: refused as the source system refuses, at the source field', () => {
  const istio = (distribute: string) => `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: { name: r }
spec:
  host: r
  trafficPolicy: { loadBalancer: { localityLbSetting: { distribute: ${distribute} } } }
`;
  it('Istio distribute: a wildcard not at the end, two wildcards, an empty part, overlapping to keys or from values', () => {
    const at = (r: number, k: string) =>
      `in.yaml[0].spec.trafficPolicy.loadBalancer.localityLbSetting.distribute[${r}].${k}`;
    const cases: [string, string][] = [
      ['[{ from: "*/z1", to: { r1: 100 } }]', at(0, 'from')],
      ['[{ from: "r1/*/*", to: { r1: 100 } }]', at(0, 'from')],
      ['[{ from: "r1//s1", to: { r1: 100 } }]', at(0, 'from')],
      ['[{ from: "r1", to: { "r1/*": 50, "r1/z1": 50 } }]', at(0, 'to.r1/z1')],
      ['[{ from: "r1", to: { "*": 50, "r2": 50 } }]', at(0, 'to.r2')],
      ['[{ from: "r1/*", to: { r1: 100 } }, { from: "r1/z1", to: { r1: 100 } }]', at(1, 'from')],
    ];
    for (const [d, path] of cases) {
      const paths = errorsOf(imp('istio', istio(d))).map((e) => e.path);
      assert.ok(paths.includes(path), `${d}: ${path} in ${paths.join(', ')}`);
    }
    ok(imp('istio', istio('[{ from: "r1/z1/*", to: { "r1/z1/*": 80, "r2/*": 20 } }]')));
  });

  it('Canopy distribute patterns compare segment by segment: "*/z1" is zone z1 in any region', async () => {
    const { localityMatches } = await import('../src/domain/policy.js');
    assert.equal(localityMatches(['r1', 'z1', 's1'], '*/z1'), true);
    assert.equal(localityMatches(['r2', 'z2', 's1'], '*/z1'), false);
    assert.equal(localityMatches(['r1', 'z2', ''], 'r1/*'), true);
  });

  const kuma = (localityAwareness: string) => `type: MeshLoadBalancingStrategy
name: mlbs
mesh: default
spec:
  targetRef: { kind: Mesh }
  to:
    - targetRef: { kind: MeshService, name: backend }
      default: { localityAwareness: ${localityAwareness} }
`;
  const la = 'in.yaml[0].spec.to[0].default.localityAwareness';
  it('Kuma: affinity tags mixing weighted and unweighted, an empty tag key', () => {
    const paths = errorsOf(
      imp(
        'kuma',
        kuma('{ localZone: { affinityTags: [{ key: k8s.io/node, weight: 9 }, { key: k8s.io/az }, { key: "" }] } }'),
      ),
    ).map((e) => e.path);
    assert.ok(paths.includes(`${la}.localZone.affinityTags`), paths.join());
    assert.ok(paths.includes(`${la}.localZone.affinityTags[2].key`), paths.join());
  });

  it('Kuma "broken failover rules": every violation Kuma reports, at its field', () => {
    const rules = [
      '{ from: { zones: [] }, to: { type: Any } }',
      '{ to: { type: Any, zones: [zone-1] } }',
      '{ to: { type: None, zones: [zone-1] } }',
      '{ to: { type: Only } }',
      '{ to: { type: AnyExcept, zones: [] } }',
      '{ to: { type: Sometimes } }',
      '{ from: { zones: [zone-1] }, to: { type: Only, zones: [zone-2], extra: 1 } }',
    ];
    const broken = `{ crossZone: { failoverThreshold: { percentage: 0 }, failover: [${rules.join(', ')}] } }`;
    const paths = errorsOf(imp('kuma', kuma(broken))).map((e) => e.path);
    const f = (i: number, k: string) => `${la}.crossZone.failover[${i}].${k}`;
    for (const p of [
      f(0, 'from.zones'),
      f(1, 'to.zones'),
      f(2, 'to.zones'),
      f(3, 'to.zones'),
      f(4, 'to.zones'),
      f(5, 'to.type'),
      `${f(6, 'to')}.extra`,
      `${la}.crossZone.failoverThreshold.percentage`,
    ])
      assert.ok(paths.includes(p), `${p} in ${paths.join(', ')}`);
  });
});

describe('Kuma targetRef by labels', () => {
  const mlbs = (ref: string) => `apiVersion: kuma.io/v1alpha1
kind: MeshLoadBalancingStrategy
metadata: { name: mlbs, namespace: kuma-system, labels: { kuma.io/mesh: default } }
spec:
  to:
    - targetRef: ${ref}
      default: { localityAwareness: { localZone: { affinityTags: [{ key: k8s.io/node }] } } }
---
type: Dataplane
mesh: default
name: dp-1
networking: { address: 10.0.0.1, inbound: [{ port: 80, tags: { kuma.io/service: backend, kuma.io/zone: z1 } }] }
`;
  it('MeshService and MeshMultiZoneService by kuma.io/display-name; other labels noted', () => {
    for (const kind of ['MeshService', 'MeshMultiZoneService']) {
      const r = imp('kuma', mlbs(`{ kind: ${kind}, labels: { kuma.io/display-name: backend, kuma.io/zone: z1 } }`));
      const [s] = ok(r).services;
      assert.equal(s!.name, 'backend');
      assert.deepEqual(s!.loadBalancing.policy?.affinity?.[0]?.scope, 'label:k8s.io/node');
      assert.ok(r.notes.some((n) => n.path.endsWith('targetRef.labels["kuma.io/zone"]')));
    }
  });
  it('labels without kuma.io/display-name, or with name, are refused at the targetRef', () => {
    const at = 'in.yaml[0].spec.to[0].targetRef.labels';
    assert.ok(
      errorsOf(imp('kuma', mlbs('{ kind: MeshService, labels: { app: backend } }'))).some((e) => e.path === at),
    );
    assert.ok(
      errorsOf(
        imp('kuma', mlbs('{ kind: MeshService, name: backend, labels: { kuma.io/display-name: backend } }')),
      ).some((e) => e.path === at),
    );
  });
});

describe('Istio ServiceEntry resolution', () => {
  const entry = (resolution: string, endpoints: string) => `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: { name: ext }
spec:
  hosts: [api.example.com]
  ports: [{ number: 443, name: tls }]
  resolution: ${resolution}
${endpoints}`;
  it('DNS with hostname endpoints imports them as hostname endpoints, with the dns settings and a note', () => {
    const r = imp(
      'istio',
      entry('DNS', '  endpoints: [{ address: API-1.example.com, locality: r1/z1 }, { address: 10.0.0.1 }]\n'),
    );
    const [s] = ok(r).services;
    assert.deepEqual(
      s!.endpoints.map((e) => e.address),
      ['api-1.example.com', '10.0.0.1'],
    );
    assert.deepEqual(s!.dns, { resolution: 'strict', lookupFamily: 'V4_PREFERRED', refreshRateMs: 60_000 });
    assert.ok(r.notes.some((n) => n.path === 'in.yaml[0].spec.resolution' && /STRICT_DNS/.test(n.message)));
  });
  it('DNS without endpoints: the host is its own endpoint; DNS_ROUND_ROBIN is LOGICAL_DNS', () => {
    const [s] = ok(imp('istio', entry('DNS_ROUND_ROBIN', ''))).services;
    assert.deepEqual(
      s!.endpoints.map((e) => [e.address, e.port]),
      [['api.example.com', 443]],
    );
    assert.equal(s!.dns?.resolution, 'logical');
  });
  it("what Istio's validation refuses is refused at the source field", () => {
    const rr = errorsOf(
      imp('istio', entry('DNS_ROUND_ROBIN', '  endpoints: [{ address: a.example }, { address: b.example }]\n')),
    );
    assert.equal(rr[0]!.path, 'in.yaml[0].spec.endpoints');
    const wild = errorsOf(imp('istio', entry('DNS', '').replace('[api.example.com]', '["*.example.com"]')));
    assert.equal(wild[0]!.path, 'in.yaml[0].spec.hosts[0]');
    const stat = errorsOf(imp('istio', entry('STATIC', '  endpoints: [{ address: api-1.example.com }]\n')));
    assert.equal(stat[0]!.path, 'in.yaml[0].spec.endpoints[0].address');
    assert.match(stat[0]!.message, /hostnames need resolution DNS/);
    assert.ok(errorsOf(imp('istio', entry('DYNAMIC', ''))).some((x) => x.path === 'in.yaml[0].spec.resolution'));
  });
  it('DNS with IP endpoints, and STATIC, import as they are', () => {
    ok(imp('istio', entry('DNS', '  endpoints: [{ address: 10.0.0.1 }]\n')));
    ok(imp('istio', entry('STATIC', '  endpoints: [{ address: 10.0.0.1 }]\n')));
  });
});

describe('ServiceEntry ports', () => {
  it('endpoints receive traffic on targetPort (default number), unless they name their own port', () => {
    const r = imp(
      'istio',
      `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: { name: s }
spec:
  hosts: [s]
  ports: [{ number: 80, name: http, protocol: HTTP, targetPort: 8080 }]
  endpoints:
    - { address: 10.0.0.1 }
    - { address: 10.0.0.2, ports: { http: 9090 } }
`,
    );
    const [s] = ok(r).services;
    assert.equal(s!.port, 80);
    assert.deepEqual(
      s!.endpoints.map((e) => e.port),
      [8080, 9090],
    );
    assert.ok(r.notes.some((n) => n.path === 'in.yaml[0].spec.ports[0].protocol'));
  });
});
