/**
 * Istio's zoneAwareLbSetting as istiod sends it (issue 22 item 4): the
 * sidecar's cluster gets zone_aware_lb_config (min_cluster_size; routing 0%
 * when disabled) instead of locality weights, valid by Envoy's protos and
 * validate.rules; its local cluster (`local_cluster`, istiod's
 * self-discovery) holds its own service's endpoints in its region, one
 * locality per zone, all at priority 0; proxyless clients keep their cluster.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Client } from '../src/domain/client.js';
import { emptyPlacement, parseLocality } from '../src/domain/locality.js';
import { explainChange } from '../src/domain/explain.js';
import { Mesh } from '../src/domain/mesh.js';
import type { ServiceSpec } from '../src/domain/service.js';
import { parseServiceSpec } from '../src/domain/spec.js';
import { serverClaCache } from '../src/resources/endpoint/endpoint.js';
import { canopyResources } from '../src/resources/registry.js';
import type { Resource } from '../src/resources/resource.js';
import { CLUSTER_TYPE, ENDPOINT_TYPE } from '../src/resources/type-urls.js';
import { placementOf } from '../src/sessions/placement.js';
import { flatten } from '../src/wire/rope.js';
import { ep, lb, service } from './support/builders.js';
import { envoyType } from './support/envoy-protos.js';
import { pgvCheckBytes } from './support/pgv.js';
import { encodeProtoJson } from './support/proto-json.js';
import { envoyBootstrap } from '../src/cli/bootstrap.js';

type Obj = Record<string, unknown>;

function decodedAny(r: Resource | undefined, typeUrl: string): Obj {
  assert.ok(r, 'resource exists');
  const any = envoyType('google.protobuf.Any').decode(flatten(r.any)) as unknown as {
    type_url: string;
    value: Uint8Array;
  };
  assert.equal(any.type_url, typeUrl);
  assert.deepEqual(pgvCheckBytes(typeUrl, any.value), []);
  const t = envoyType(typeUrl.slice(typeUrl.lastIndexOf('/') + 1));
  return t.toObject(t.decode(any.value), { enums: String, longs: Number, arrays: true }) as Obj;
}

const envoyAt = (loc: string, localService?: string): Client => ({
  ...emptyPlacement(),
  locality: parseLocality(loc),
  kind: 'envoy',
  ...(localService ? { localService } : {}),
});

const catalog = (zoneAware: { enabled: boolean; minClusterSize?: number }): ServiceSpec => ({
  ...service('catalog', [ep({ locality: 'us/us-a' }), ep({ locality: 'us/us-b' }), ep({ locality: 'eu/eu-a' })], {
    ...lb('failover', ['region']),
    policy: { zoneAware },
  }),
});

describe('zone-aware routing for Envoy sidecars', () => {
  it('the config reads policy.zoneAware and writes it back', () => {
    const r = parseServiceSpec({
      name: 's',
      loadBalancing: { policy: { zoneAware: { minClusterSize: 3 } } },
    });
    assert.ok(r.ok);
    assert.deepEqual(r.value.loadBalancing.policy, { zoneAware: { enabled: true, minClusterSize: 3 } });
    const bad = parseServiceSpec({
      name: 's',
      loadBalancing: {
        policy: { zoneAware: { minClusterSize: -1, on: true }, distribute: [{ from: '*', to: { '*': 100 } }] },
      },
    });
    assert.ok(!bad.ok);
    assert.deepEqual(bad.errors.map((e) => e.path).sort(), [
      'loadBalancing.policy.zoneAware',
      'loadBalancing.policy.zoneAware.minClusterSize',
      'loadBalancing.policy.zoneAware.on',
    ]);
  });

  it('the cluster carries zone_aware_lb_config instead of locality weights; the CLA keeps the region tiers', () => {
    const mesh = new Mesh();
    mesh.put(catalog({ enabled: true, minClusterSize: 3 }));
    const registry = canopyResources(mesh, serverClaCache());
    const c = decodedAny(registry.get(CLUSTER_TYPE)!.resolve('catalog', envoyAt('us/us-a')), CLUSTER_TYPE);
    assert.deepEqual(c['common_lb_config'], { zone_aware_lb_config: { min_cluster_size: { value: 3 } } });
    const cla = decodedAny(registry.get(ENDPOINT_TYPE)!.resolve('catalog', envoyAt('us/us-a')), ENDPOINT_TYPE);
    const groups = (cla['endpoints'] as Obj[]).map((g) => `${(g['locality'] as Obj)['zone']}:${g['priority'] ?? 0}`);
    assert.deepEqual(groups.sort(), ['eu-a:1', 'us-a:0', 'us-b:0']);
  });

  it('enabled: false sends routing 0%', () => {
    const mesh = new Mesh();
    mesh.put(catalog({ enabled: false }));
    const registry = canopyResources(mesh, serverClaCache());
    const c = decodedAny(registry.get(CLUSTER_TYPE)!.resolve('catalog', envoyAt('us/us-a')), CLUSTER_TYPE);
    assert.deepEqual(c['common_lb_config'], { zone_aware_lb_config: { routing_enabled: { value: 0 } } });
  });

  it("an Envoy's local_cluster holds its own service's endpoints in its region, a locality per zone, priority 0", () => {
    const mesh = new Mesh();
    mesh.put(catalog({ enabled: true }));
    mesh.put(
      service('reviews', [
        ep({ locality: 'us/us-a' }),
        ep({ locality: 'us/us-a' }),
        ep({ locality: 'us/us-b', weight: 3 }),
        ep({ locality: 'eu/eu-a' }),
        ep({ locality: 'us/us-b', health: 'unhealthy' }),
      ]),
    );
    const eds = canopyResources(mesh, serverClaCache()).get(ENDPOINT_TYPE)!;
    const cla = decodedAny(eds.resolve('local_cluster', envoyAt('us/us-b', 'reviews')), ENDPOINT_TYPE);
    assert.equal(cla['cluster_name'], 'local_cluster');
    const groups = (cla['endpoints'] as Obj[]).map((g) => [
      (g['locality'] as Obj)['zone'],
      g['priority'] ?? 0,
      (g['lb_endpoints'] as Obj[]).length,
      (g['load_balancing_weight'] as Obj)['value'],
    ]);
    assert.deepEqual(groups, [
      ['us-a', 0, 2, 2],
      ['us-b', 0, 1, 3],
    ]);
    // The node metadata key names the service; without it `local_cluster` is an ordinary name.
    const node = {
      id: 'n',
      cluster: '',
      locality: { region: 'us', zone: 'us-b', subzone: '' },
      userAgentName: 'envoy',
    };
    assert.equal(placementOf({ ...node, metadata: { 'canopy.local_service': 'reviews' } }).localService, 'reviews');
    assert.equal(eds.resolve('local_cluster', envoyAt('us/us-b')), undefined);
    assert.ok([...eds.touchedBy(new Set(['reviews']))].includes('local_cluster'));
  });

  it('canopy bootstrap envoy --local-service writes the local cluster and names the service', () => {
    const base = {
      nodeId: 'n1',
      cluster: 'reviews',
      region: 'us',
      zone: 'us-b',
      subzone: '',
      xds: '127.0.0.1:18000',
      outboundAddress: '127.0.0.1',
      envoyAdminPort: 9901,
    };
    const type = envoyType('envoy.config.bootstrap.v3.Bootstrap');
    const { bytes, errors } = encodeProtoJson(type, envoyBootstrap({ ...base, localService: 'reviews' }));
    assert.deepEqual(errors, []);
    assert.ok(bytes);
    assert.deepEqual(pgvCheckBytes('envoy.config.bootstrap.v3.Bootstrap', bytes), []);
    const b = type.toObject(type.decode(bytes), { enums: String, longs: Number, arrays: true }) as Obj;
    assert.equal((b['cluster_manager'] as Obj)['local_cluster_name'], 'local_cluster');
    // Beside it, where Envoy sends its load reports (the ADS cluster: Canopy).
    const lrs = (b['cluster_manager'] as Obj)['load_stats_config'] as { grpc_services: { envoy_grpc: Obj }[] };
    assert.equal(lrs.grpc_services[0]?.envoy_grpc['cluster_name'], 'canopy');
    const local = ((b['static_resources'] as Obj)['clusters'] as Obj[]).find((c) => c['name'] === 'local_cluster');
    assert.equal(local?.['type'], 'EDS');
    const md = (b['node'] as Obj)['metadata'] as { fields: Record<string, { stringValue: string }> };
    assert.equal(md.fields['canopy.local_service']?.stringValue, 'reviews');
    assert.equal(((envoyBootstrap(base) as Obj)['cluster_manager'] as Obj)['local_cluster_name'], undefined);
  });

  it('explain lists a zoneAware change among the service-wide settings', () => {
    const a = new Mesh();
    a.put(service('catalog', [ep({ locality: 'us/us-a' })], lb('failover', ['region'])));
    const b = new Mesh();
    b.put(catalog({ enabled: true, minClusterSize: 3 }));
    const r = explainChange(a.get('catalog')!, b.get('catalog')!, {
      ...emptyPlacement(),
      locality: parseLocality('us/us-a'),
    });
    assert.deepEqual(
      r.settings.find((x) => x.field === 'policy.zoneAware'),
      { field: 'policy.zoneAware', current: 'null', proposed: '{"enabled":true,"minClusterSize":3}' },
    );
  });
});
