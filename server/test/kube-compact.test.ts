/**
 * What the Kubernetes source keeps of each object it lists or watches
 * (store/kube-watch.ts compactSlice, compactService, compactNode): the
 * fields Canopy reads, and nothing the mapping would miss: a Service and its
 * slices map to the same Canopy services compacted as whole. Objects as the
 * API server sends them (managedFields, targetRef, status). Pure logic.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { localityInterner } from '../src/domain/locality.js';
import { mapService, nodePlace, type KubeService, type KubeSlice, type MapContext } from '../src/policy/k8s-live.js';
import { compactNode, compactService, compactSlice } from '../src/kube/kube-watch.js';

const managedFields = [{ manager: 'kubectl', operation: 'Update', fieldsV1: { 'f:metadata': { 'f:labels': {} } } }];
const meta = <X extends object>(name: string, extra: X = {} as X) => ({
  name,
  namespace: 'shop',
  uid: '5d0c1f5e-0f7e-4a4b-9a35-1f0e1c1d2e3f',
  resourceVersion: '4711',
  creationTimestamp: new Date(0),
  managedFields,
  ...extra,
});

const fullService = {
  apiVersion: 'v1',
  kind: 'Service',
  metadata: meta('web', {
    labels: { app: 'web' },
    annotations: {
      'canopy.dev/load-balancing': '{"mode":"failover"}',
      'kubectl.kubernetes.io/last-applied-configuration': '{"apiVersion":"v1","kind":"Service"}',
    },
  }),
  spec: {
    type: 'ClusterIP',
    clusterIP: '10.96.0.10',
    clusterIPs: ['10.96.0.10'],
    ipFamilies: ['IPv4'],
    sessionAffinity: 'None',
    ports: [{ name: 'http', port: 80, protocol: 'TCP', targetPort: 8080, appProtocol: 'http' }],
    trafficDistribution: 'PreferClose',
  },
  status: { loadBalancer: {} },
};

const fullSlice = {
  apiVersion: 'discovery.k8s.io/v1',
  kind: 'EndpointSlice',
  metadata: meta('web-abc12', {
    labels: { 'kubernetes.io/service-name': 'web', 'topology.istio.io/network': 'n2' },
    ownerReferences: [{ kind: 'Service', name: 'web', uid: 'x' }],
  }),
  addressType: 'IPv4',
  ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
  endpoints: [
    {
      addresses: ['10.0.0.1'],
      conditions: { ready: true, serving: true, terminating: false },
      nodeName: 'n1',
      zone: 'z1',
      hints: { forZones: [{ name: 'z1' }, { name: 'z2' }] },
      targetRef: { kind: 'Pod', name: 'web-7d9f8-abcde', namespace: 'shop', uid: 'y' },
    },
    { addresses: ['10.0.0.2'], conditions: { ready: false }, nodeName: 'n2' },
  ],
};

const nodes = new Map([
  ['n1', nodePlace({ 'topology.kubernetes.io/region': 'r1', 'topology.kubernetes.io/zone': 'z1' }, 'rack')],
  ['n2', nodePlace({ 'topology.kubernetes.io/region': 'r1', 'topology.kubernetes.io/zone': 'z2' }, 'rack')],
]);
const ctx: MapContext = {
  node: (n) => nodes.get(n),
  locality: localityInterner(),
  cluster: { name: 'c1', network: 'n1' },
};

describe('what the Kubernetes source keeps of an object', () => {
  it('a Service and its slice map as they did whole', () => {
    const whole = mapService(fullService as KubeService, [fullSlice as KubeSlice], ctx);
    const kept = mapService(compactService(fullService), [compactSlice(fullSlice)], ctx);
    assert.ok(whole.specs.length > 0 && whole.specs[0]!.endpoints.length === 2);
    assert.deepEqual(kept, whole);
  });

  it('drops what the API server adds and the mapping never reads', () => {
    const s = compactSlice(fullSlice) as unknown as Record<string, unknown>;
    assert.deepEqual(Object.keys(s).sort(), ['addressType', 'endpoints', 'metadata', 'ports']);
    assert.deepEqual(s['metadata'], {
      name: 'web-abc12',
      namespace: 'shop',
      resourceVersion: '4711',
      labels: fullSlice.metadata.labels,
    });
    assert.deepEqual(s['endpoints'], [
      {
        nodeName: 'n1',
        zone: 'z1',
        addresses: ['10.0.0.1'],
        conditions: { ready: true, serving: true, terminating: false },
        hints: { forZones: [{ name: 'z1' }, { name: 'z2' }] },
      },
      { nodeName: 'n2', addresses: ['10.0.0.2'], conditions: { ready: false } },
    ]);
    const svc = compactService(fullService);
    assert.equal(svc.metadata?.annotations?.['kubectl.kubernetes.io/last-applied-configuration'], undefined);
    assert.equal(svc.metadata?.annotations?.['canopy.dev/load-balancing'], '{"mode":"failover"}');
    assert.deepEqual(svc.spec?.ports, [{ name: 'http', port: 80, appProtocol: 'http' }]);
    assert.equal('status' in svc, false);
  });

  it('a Node keeps its name, resourceVersion and labels', () => {
    const node = {
      metadata: meta('n1', { labels: { 'topology.kubernetes.io/zone': 'z1' } }),
      status: { images: [{ names: ['registry.k8s.io/pause:3.10'], sizeBytes: 320368 }] },
    };
    assert.deepEqual(compactNode(node), {
      metadata: { name: 'n1', namespace: 'shop', resourceVersion: '4711', labels: node.metadata.labels },
    });
  });
});
