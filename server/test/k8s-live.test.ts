/**
 * The live Kubernetes mapping (policy/k8s-live.ts): Services, EndpointSlices
 * and Node localities → Canopy services. Pure logic, table-driven.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { localityInterner } from '../src/domain/locality.js';
import { FOR_ZONES_LABEL } from '../src/domain/zone-hints.js';
import {
  destinationRuleTarget,
  healthOf,
  mapService,
  nodePlace,
  type KubeService,
  type KubeSlice,
  type MapContext,
} from '../src/policy/k8s-live.js';

const nodes = new Map([
  ['n1', nodePlace({ 'topology.kubernetes.io/region': 'r1', 'topology.kubernetes.io/zone': 'z1', rack: 's9' }, 'rack')],
  ['n2', nodePlace({ 'topology.kubernetes.io/region': 'r1', 'topology.kubernetes.io/zone': 'z2' }, 'rack')],
]);
const ctx: MapContext = { node: (n) => nodes.get(n), locality: localityInterner() };

const service = (spec: NonNullable<KubeService['spec']>, annotations?: Record<string, string>): KubeService => ({
  metadata: { name: 'web', namespace: 'shop', ...(annotations ? { annotations } : {}) },
  spec,
});
const slice = (
  addressType: string,
  ports: NonNullable<KubeSlice['ports']>,
  endpoints: NonNullable<KubeSlice['endpoints']>,
): KubeSlice => ({
  metadata: { name: 's', namespace: 'shop', labels: { 'kubernetes.io/service-name': 'web' } },
  addressType,
  ports,
  endpoints,
});

describe('live Kubernetes mapping', () => {
  it('conditions → health, as kube-proxy and istiod read them', () => {
    const cases: [Parameters<typeof healthOf>[0], string][] = [
      [undefined, 'healthy'],
      [{ ready: true }, 'healthy'],
      [{ ready: false }, 'unhealthy'],
      [{ ready: false, serving: true, terminating: true }, 'terminating'],
      [{ ready: false, serving: false, terminating: true }, 'draining'],
      [{ ready: false, serving: true }, 'unhealthy'],
    ];
    for (const [c, want] of cases) assert.equal(healthOf(c), want, JSON.stringify(c));
  });

  it('names NAME.NAMESPACE for the first port and NAME.NAMESPACE_PORT for others, matching slice ports by name', () => {
    const m = mapService(
      service({
        clusterIP: '10.96.0.5',
        ports: [
          { name: 'grpc', port: 9000, appProtocol: 'grpc' },
          { name: 'http-metrics', port: 9100 },
        ],
      }),
      [
        slice(
          'IPv4',
          [
            { name: 'grpc', port: 19000 },
            { name: 'http-metrics', port: 19100 },
          ],
          [{ addresses: ['10.0.0.1'], nodeName: 'n1' }],
        ),
      ],
      ctx,
    );
    assert.deepEqual(m.errors, []);
    assert.deepEqual(
      m.specs.map((s) => [s.name, s.port, s.vip, s.protocol, s.endpoints.map((e) => `${e.address}:${e.port}`)]),
      [
        ['web.shop', 9000, '10.96.0.5', 'grpc', ['10.0.0.1:19000']],
        ['web.shop_9100', 9100, '10.96.0.5', 'http', ['10.0.0.1:19100']],
      ],
    );
  });

  it('takes locality from the node (subzone from the configured label), both families, first address, FQDN ignored', () => {
    const m = mapService(
      service({ ports: [{ port: 80 }], trafficDistribution: 'PreferSameZone' }),
      [
        slice('IPv4', [{ port: 8080 }], [{ addresses: ['10.0.0.1', '10.0.0.99'], nodeName: 'n1', zone: 'stale' }]),
        slice('IPv6', [{ port: 8080 }], [{ addresses: ['FD00::0001'], nodeName: 'n2' }]),
        slice('IPv4', [{ port: 8080 }], [{ addresses: ['10.0.0.3'], zone: 'z3' }]),
        slice('FQDN', [{ port: 8080 }], [{ addresses: ['db.example.com'] }]),
      ],
      ctx,
    );
    const eps = m.specs[0]!.endpoints.map((e) => [
      e.address,
      e.node,
      e.locality.region,
      e.locality.zone,
      e.locality.subzone,
    ]);
    assert.deepEqual(eps, [
      ['10.0.0.1', 'n1', 'r1', 'z1', 's9'],
      ['fd00::1', 'n2', 'r1', 'z2', ''],
      ['10.0.0.3', '', '', 'z3', ''],
    ]);
    assert.equal(m.specs[0]!.loadBalancing.policy?.trafficDistribution, 'PreferSameZone');
  });

  it("Istio's network and cluster labels on a slice: the network beats the cluster's, a named cluster beats the label", () => {
    const labelled = (name: string, labels: Record<string, string>, address: string): KubeSlice => ({
      ...slice('IPv4', [{ port: 80 }], [{ addresses: [address] }]),
      metadata: { name, namespace: 'shop', labels: { 'kubernetes.io/service-name': 'web', ...labels } },
    });
    const slices = [
      labelled('a', { 'topology.istio.io/cluster': 'c1', 'topology.istio.io/network': 'n1' }, '10.0.0.1'),
      labelled('b', {}, '10.0.0.2'),
    ];
    const scopes = (c: MapContext) =>
      mapService(service({ ports: [{ port: 80 }] }), slices, c).specs[0]!.endpoints.map(
        (e) => `${e.address} ${e.cluster} ${e.network}`,
      );
    assert.deepEqual(scopes(ctx), ['10.0.0.1 c1 n1', '10.0.0.2  ']);
    assert.deepEqual(scopes({ ...ctx, cluster: { name: 'east', network: 'n9' } }), [
      '10.0.0.1 east n1',
      '10.0.0.2 east n9',
    ]);
  });

  it('an address in two slices keeps its best condition', () => {
    const m = mapService(
      service({ ports: [{ port: 80 }] }),
      [
        slice('IPv4', [{ port: 80 }], [{ addresses: ['10.0.0.1'], conditions: { ready: false } }]),
        slice('IPv4', [{ port: 80 }], [{ addresses: ['10.0.0.1'], conditions: { ready: true } }]),
      ],
      ctx,
    );
    assert.deepEqual(
      m.specs[0]!.endpoints.map((e) => e.health),
      ['healthy'],
    );
  });

  it('internalTrafficPolicy Local is strict by node; the load-balancing annotation overrides both', () => {
    const local = mapService(service({ ports: [{ port: 80 }], internalTrafficPolicy: 'Local' }), [], ctx);
    assert.deepEqual(local.specs[0]!.loadBalancing.routingPreference, ['node']);
    assert.equal(local.specs[0]!.loadBalancing.mode, 'strict');
    const annotated = mapService(
      service(
        { ports: [{ port: 80 }], internalTrafficPolicy: 'Local' },
        { 'canopy.dev/load-balancing': 'mode: failover\nroutingPreference: [region, zone]' },
      ),
      [],
      ctx,
    );
    assert.deepEqual(annotated.specs[0]!.loadBalancing.routingPreference, ['region', 'zone']);
    assert.equal(annotated.specs[0]!.loadBalancing.mode, 'failover');
  });

  it('refuses a bad annotation or trafficDistribution with the field path', () => {
    const bad = mapService(
      service({ ports: [{ port: 80 }] }, { 'canopy.dev/load-balancing': '{"mode": "nearest"}' }),
      [],
      ctx,
    );
    assert.equal(bad.specs.length, 0);
    assert.match(
      bad.errors[0]!.path,
      /^Service shop\/web: metadata\.annotations\["canopy\.dev\/load-balancing"\]\.mode$/,
    );
    const td = mapService(service({ ports: [{ port: 80 }], trafficDistribution: 'Nearest' }), [], ctx);
    assert.equal(td.errors[0]!.path, 'Service shop/web: spec.trafficDistribution');
  });

  it('a dual-stack Service has both cluster IPs as VIPs, the primary first; a single-stack one, its one', () => {
    const dual = mapService(
      service({ clusterIP: 'fd00:10:96::a', clusterIPs: ['fd00:10:96::a', '10.96.0.5'], ports: [{ port: 80 }] }),
      [],
      ctx,
    ).specs[0]!;
    assert.equal(dual.vip, 'fd00:10:96::a');
    assert.deepEqual(dual.vips, ['fd00:10:96::a', '10.96.0.5']);
    const single = mapService(service({ clusterIP: '10.96.0.5', ports: [{ port: 80 }] }), [], ctx).specs[0]!;
    assert.equal(single.vip, '10.96.0.5');
    assert.equal(single.vips, undefined);
  });

  it('ExternalName and port-less Services have no Canopy service; hints for other zones are counted and carried', () => {
    assert.equal(mapService(service({ type: 'ExternalName' }), [], ctx).specs.length, 0);
    assert.equal(mapService(service({ clusterIP: 'None' }), [], ctx).specs.length, 0);
    const hinted = mapService(
      service({ ports: [{ port: 80 }] }),
      [
        slice(
          'IPv4',
          [{ port: 80 }],
          [{ addresses: ['10.0.0.1'], nodeName: 'n1', hints: { forZones: [{ name: 'z2' }] } }],
        ),
      ],
      ctx,
    );
    assert.equal(hinted.foreignHints, 1);
    // Followed, as kube-proxy does: the endpoint carries the zones it is hinted for.
    assert.equal(hinted.specs[0]!.endpoints[0]!.labels[FOR_ZONES_LABEL], 'z2');
  });

  it("a DestinationRule's host names the Service it applies to", () => {
    const cases: [string, string, string | undefined][] = [
      ['web', 'shop', 'web.shop'],
      ['web.shop', 'other', 'web.shop'],
      ['web.shop.svc', 'other', 'web.shop'],
      ['web.shop.svc.cluster.local', 'other', 'web.shop'],
      ['*.shop.svc.cluster.local', 'shop', undefined],
      ['api.example.com', 'shop', undefined],
    ];
    for (const [host, ns, want] of cases) assert.equal(destinationRuleTarget(host, ns), want, host);
  });
});
