/** The Istio, Kuma and Kubernetes importers with documents as users write them, and with bad input. */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { promisify } from 'node:util';
import { load as parse } from 'js-yaml';
import { FOR_ZONES_LABEL } from '../src/domain/zone-hints.js';
import { importDocuments, type PolicySystem } from '../src/policy/import.js';
import { loadConfigFile, parseConfigText } from '../src/config/config-file.js';

const run = promisify(execFile);
const CLI = new URL('../src/cli/canopy.js', import.meta.url).pathname;

/** After istio.io's "Locality failover" task, with a ServiceEntry for the endpoints. */
const ISTIO = `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata:
  name: helloworld
spec:
  host: helloworld.sample.svc.cluster.local
  trafficPolicy:
    connectionPool:
      http:
        maxRequestsPerConnection: 1
    loadBalancer:
      simple: ROUND_ROBIN
      localityLbSetting:
        enabled: true
        failover:
          - from: region1
            to: region2
    outlierDetection:
      consecutive5xxErrors: 1
      interval: 1s
      baseEjectionTime: 1m
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata:
  name: helloworld
spec:
  hosts: [helloworld.sample.svc.cluster.local]
  addresses: [10.96.0.20]
  ports:
    - number: 5000
      name: http
      protocol: HTTP
  resolution: STATIC
  endpoints:
    - address: 127.0.0.1
      locality: region1/zone1/subzone1
      labels: { app: helloworld, version: v1 }
    - address: 127.0.0.2
      locality: region1/zone1/subzone2
    - address: 127.0.0.3
      locality: region2/zone2/subzone1
      network: net2
`;

/** Kong Mesh doc "Prioritize traffic to data planes in specific order", plus Dataplanes. */
const KUMA = `apiVersion: kuma.io/v1alpha1
kind: MeshLoadBalancingStrategy
metadata:
  name: local-zone-affinity-cross-backend
  namespace: kuma-demo
  labels:
    kuma.io/mesh: default
spec:
  to:
    - targetRef:
        kind: MeshService
        name: backend
      default:
        localityAwareness:
          localZone:
            affinityTags:
              - key: kubernetes.io/hostname
                weight: 9000
              - key: topology.kubernetes.io/zone
                weight: 9
          crossZone:
            failover:
              - from:
                  zones: [us-1, us-2, us-3]
                to:
                  type: Only
                  zones: [us-1, us-2, us-3]
              - to:
                  type: Only
                  zones: [us-4]
            failoverThreshold:
              percentage: 70
---
type: Dataplane
mesh: default
name: backend-1
networking:
  address: 127.0.0.1
  inbound:
    - port: 8080
      tags:
        kuma.io/service: backend
        kuma.io/zone: us-1
        kubernetes.io/hostname: h1
---
type: Dataplane
mesh: default
name: backend-2
networking:
  address: 127.0.0.2
  inbound:
    - port: 8080
      tags: { kuma.io/service: backend, kuma.io/zone: us-4 }
`;

/** A Service with trafficDistribution as kubectl shows it, and its EndpointSlice. */
const K8S = `apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: default
spec:
  type: ClusterIP
  selector: { app: web }
  clusterIP: 10.96.0.30
  clusterIPs: [10.96.0.30]
  ipFamilies: [IPv4]
  ipFamilyPolicy: SingleStack
  sessionAffinity: None
  internalTrafficPolicy: Cluster
  trafficDistribution: PreferClose
  ports:
    - name: http
      port: 80
      protocol: TCP
      targetPort: 8080
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: web-abc12
  labels: { kubernetes.io/service-name: web }
addressType: IPv4
ports:
  - name: http
    port: 8080
    protocol: TCP
endpoints:
  - addresses: [127.0.0.1]
    conditions: { ready: true, serving: true, terminating: false }
    nodeName: node-a
    zone: zone-a
    hints: { forZones: [{ name: zone-a }] }
    targetRef: { kind: Pod, name: web-1, namespace: default }
  - addresses: [127.0.0.2]
    conditions: { ready: false, serving: true, terminating: true }
    nodeName: node-b
    zone: zone-b
  - addresses: [127.0.0.3]
    conditions: { ready: true }
    nodeName: node-c
    zone: zone-b
    hints: { forZones: [{ name: zone-a }] }
`;

function imp(system: PolicySystem | undefined, text: string) {
  return importDocuments([{ name: 'in.yaml', text }], system);
}

function errorsOf(r: ReturnType<typeof imp>) {
  assert.ok(!r.result.ok, 'should fail');
  return r.result.errors;
}

describe('Istio importer', () => {
  it('imports a DestinationRule with failover and outlierDetection, and its ServiceEntry', () => {
    const r = imp('istio', ISTIO);
    assert.ok(r.result.ok, JSON.stringify(!r.result.ok && r.result.errors));
    const [s] = r.result.value.services;
    assert.equal(s!.name, 'helloworld.sample.svc.cluster.local');
    assert.equal(s!.vip, '10.96.0.20');
    assert.equal(s!.port, 5000);
    assert.equal(s!.loadBalancing.mode, 'failover');
    assert.deepEqual(s!.loadBalancing.policy?.failover?.rules, [
      { from: ['region1'], to: { type: 'only', values: ['region2'] } },
    ]);
    assert.deepEqual(
      s!.endpoints.map((e) => [e.address, e.locality.subzone, e.network]),
      [
        ['127.0.0.1', 'subzone1', ''],
        ['127.0.0.2', 'subzone2', ''],
        ['127.0.0.3', 'subzone1', 'net2'],
      ],
    );
    const paths = r.notes.map((n) => n.path);
    for (const p of [
      'in.yaml[0].spec.trafficPolicy.connectionPool',
      'in.yaml[0].spec.trafficPolicy.loadBalancer.simple',
      'in.yaml[0].spec.trafficPolicy.outlierDetection',
    ])
      assert.ok(paths.includes(p), `${p} noted, got ${paths.join(', ')}`);
  });

  it('says failover has no effect without outlierDetection', () => {
    const r = imp('istio', ISTIO.replace(/    outlierDetection:\n(      .*\n)+/, ''));
    assert.ok(r.result.ok);
    assert.equal(r.result.value.services[0]!.loadBalancing.mode, 'random');
    assert.equal(r.result.value.services[0]!.loadBalancing.policy, undefined);
    assert.ok(
      r.notes.some(
        (n) =>
          n.path === 'in.yaml[0].spec.trafficPolicy.loadBalancer.localityLbSetting' &&
          /no effect without outlierDetection/.test(n.message),
      ),
    );
  });

  it('reports bad input with its path', () => {
    const bad = ISTIO.replace(
      '        failover:\n          - from: region1\n            to: region2',
      '        failover:\n          - from: region1/zone1\n            to: region1/zone1\n        distribute:\n          - from: "*"\n            to: { "region1/*": 60 }\n        failovr: []',
    );
    const paths = errorsOf(imp('istio', bad)).map((e) => e.path);
    for (const p of [
      'in.yaml[0].spec.trafficPolicy.loadBalancer.localityLbSetting.failover[0].from',
      'in.yaml[0].spec.trafficPolicy.loadBalancer.localityLbSetting.failover[0].to',
      'in.yaml[0].spec.trafficPolicy.loadBalancer.localityLbSetting.distribute[0].to',
      'in.yaml[0].spec.trafficPolicy.loadBalancer.localityLbSetting.failovr',
      'in.yaml[0].spec.trafficPolicy.loadBalancer.localityLbSetting.failover',
    ])
      assert.ok(paths.includes(p), `${p} in ${paths.join(', ')}`);
    const wrongKind = errorsOf(imp('istio', K8S));
    assert.equal(wrongKind[0]!.path, 'in.yaml[0]');
    const yaml = errorsOf(imp('istio', 'kind: [oops'));
    assert.match(yaml[0]!.message, /YAML syntax error/);
  });
});

describe('Kuma importer', () => {
  it('imports localityAwareness with affinity weights, cross-zone rules and the threshold', () => {
    const r = imp('kuma', KUMA);
    assert.ok(r.result.ok, JSON.stringify(!r.result.ok && r.result.errors));
    const [s] = r.result.value.services;
    assert.equal(s!.name, 'backend');
    assert.deepEqual(s!.loadBalancing.routingPreference, ['zone']);
    assert.equal(s!.loadBalancing.overprovisioningFactor, 100, 'uint32(100/70)·100');
    assert.deepEqual(s!.loadBalancing.policy?.affinity, [
      { scope: 'label:kubernetes.io/hostname', weight: 9000 },
      { scope: 'label:topology.kubernetes.io/zone', weight: 9 },
    ]);
    assert.equal(s!.loadBalancing.policy?.failover?.unmatched, 'drop');
    assert.deepEqual(
      s!.endpoints.map((e) => e.locality.zone),
      ['us-1', 'us-4'],
    );
  });

  it('reports bad input with its path', () => {
    const bad = KUMA.replace(
      'type: Only\n                  zones: [us-4]',
      'type: Some\n                  zones: [us-4]',
    ).replace('percentage: 70', 'percentage: 0');
    const paths = errorsOf(imp('kuma', bad)).map((e) => e.path);
    assert.ok(
      paths.includes('in.yaml[0].spec.to[0].default.localityAwareness.crossZone.failover[1].to.type'),
      paths.join(', '),
    );
    assert.ok(
      paths.includes('in.yaml[0].spec.to[0].default.localityAwareness.crossZone.failoverThreshold.percentage'),
      paths.join(', '),
    );
    const noService = errorsOf(
      imp(
        'kuma',
        'type: Dataplane\nmesh: default\nname: x\nnetworking:\n  address: 127.0.0.9\n  inbound:\n    - port: 1\n      tags: {}\n',
      ),
    );
    assert.equal(noService[0]!.path, 'in.yaml[0].networking.inbound[0].tags');
  });
});

describe('Kubernetes importer', () => {
  it('imports trafficDistribution with the EndpointSlice, readiness and hints', () => {
    const r = imp('k8s', K8S);
    assert.ok(r.result.ok, JSON.stringify(!r.result.ok && r.result.errors));
    const [s] = r.result.value.services;
    assert.equal(s!.vip, '10.96.0.30');
    assert.equal(s!.port, 80);
    assert.equal(s!.loadBalancing.policy?.trafficDistribution, 'PreferSameZone');
    assert.deepEqual(
      s!.endpoints.map((e) => [e.address, e.port, e.locality.zone, e.node, e.health]),
      [
        ['127.0.0.1', 8080, 'zone-a', 'node-a', 'healthy'],
        ['127.0.0.2', 8080, 'zone-b', 'node-b', 'terminating'],
        ['127.0.0.3', 8080, 'zone-b', 'node-c', 'healthy'],
      ],
    );
    const notes = r.notes.map((n) => n.path);
    assert.ok(notes.includes('in.yaml[0].spec.trafficDistribution'), 'PreferClose is said to be deprecated');
    // A hint for another zone is followed (kube-proxy): the endpoint carries the zones it is hinted for.
    assert.ok(!notes.includes('in.yaml[1].endpoints[2].hints.forZones'));
    assert.deepEqual(
      s!.endpoints.map((e) => e.labels[FOR_ZONES_LABEL]),
      [undefined, undefined, 'zone-a'],
    );
    assert.ok(notes.includes('in.yaml[0].spec.selector'));
  });

  it("imports a dual-stack Service's two cluster IPs as its VIPs", () => {
    const dual = K8S.replace('clusterIPs: [10.96.0.30]', 'clusterIPs: [10.96.0.30, "fd00:10:96::30"]');
    const r = imp('k8s', dual);
    assert.ok(r.result.ok, JSON.stringify(!r.result.ok && r.result.errors));
    const [s] = r.result.value.services;
    assert.equal(s!.vip, '10.96.0.30');
    assert.deepEqual(s!.vips, ['10.96.0.30', 'fd00:10:96::30']);
  });

  it('reports bad input with its path', () => {
    const bad = K8S.replace('trafficDistribution: PreferClose', 'trafficDistribution: PreferFar').replace(
      'kubernetes.io/service-name: web',
      'app: web',
    );
    const errors = errorsOf(imp('k8s', bad));
    const paths = errors.map((e) => e.path);
    assert.ok(paths.includes('in.yaml[0].spec.trafficDistribution'), paths.join(', '));
    assert.ok(paths.includes('in.yaml[1].metadata.labels'), paths.join(', '));
    const invalid = errorsOf(imp('k8s', K8S.replace('addresses: [127.0.0.1]', 'addresses: [not-an-ip]')));
    // At the slice's own field (Kubernetes' validation), not the generated config.
    assert.equal(invalid[0]!.path, 'in.yaml[1].endpoints[0].addresses[0]');
    assert.match(invalid[0]!.message, /must be an IPv4 address/);
  });
});

describe('serve --config and canopy import', () => {
  it('a config file of policy documents loads as a Canopy config, with notes', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'canopy-import-'));
    const file = path.join(dir, 'mesh.yaml');
    writeFileSync(
      file,
      `server: { xdsPort: 0 }\nservices:\n  - name: plain\n    endpoints: [{ address: 127.0.0.9, port: 1 }]\n---\n${K8S}---\n${KUMA}`,
    );
    const loaded = await loadConfigFile(file);
    assert.ok(loaded.ok, JSON.stringify(!loaded.ok && loaded.errors));
    assert.deepEqual(
      loaded.value.services.map((s) => s.name),
      ['plain', 'backend', 'web'],
    );
    assert.equal(loaded.value.server.xdsPort, 0);
    assert.ok((loaded.value.notes ?? []).some((n) => n.path.startsWith('mesh.yaml[1]')));
    // A plain Canopy config is read as before.
    const plain = await parseConfigText('services: []\n');
    assert.ok(plain.ok);
  });

  it('canopy import prints a config that loads, notes as comments; errors exit 1 with paths', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'canopy-import-'));
    const file = path.join(dir, 'istio.yaml');
    writeFileSync(file, ISTIO);
    const { stdout } = await run(process.execPath, [CLI, 'import', 'istio', file]);
    assert.match(stdout, /^# note: istio.yaml\[0\]\.spec\.trafficPolicy\.connectionPool: not imported/m);
    const again = await parseConfigText(stdout);
    assert.ok(again.ok, JSON.stringify(!again.ok && again.errors));
    assert.equal(again.value.services[0]!.loadBalancing.policy?.failover?.rules.length, 1);
    assert.ok(parse(stdout));
    const badFile = path.join(dir, 'bad.yaml');
    writeFileSync(badFile, ISTIO.replace('to: region2', 'to: region1'));
    const failed = await run(process.execPath, [CLI, 'import', 'istio', badFile]).then(
      () => assert.fail('should exit non-zero'),
      (e: { code: number; stderr: string }) => e,
    );
    assert.equal(failed.code, 1);
    assert.match(
      failed.stderr,
      /bad\.yaml\[0\]\.spec\.trafficPolicy\.loadBalancer\.localityLbSetting\.failover\[0\]\.to: must differ/,
    );
  });
});
