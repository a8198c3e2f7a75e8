/**
 * The hand-assembled bytes decode with Envoy's real protos, stay small, and
 * reuse the encoding of endpoints that did not change.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Cla } from '../src/domain/cla.js';
import type { Endpoint } from '../src/domain/service.js';
import { decodeDiscoveryRequest, encodeAny, encodeCla, encodeDiscoveryResponse, lbEndpointEncodeCount } from '../src/xds/codec.js';
import { messageType } from '../src/xds/protos.js';
import { ENDPOINT_TYPE } from '../src/xds/type-urls.js';
import { buildCla } from '../src/domain/cla.js';
import { Mesh } from '../src/domain/mesh.js';
import { planFor } from '../src/domain/priorities.js';
import { client, ep, lb, service } from './support/builders.js';

function claOf(endpoints: Endpoint[]): Cla {
  return {
    clusterName: 'echo',
    overprovisioningFactor: 140,
    groups: [
      { locality: { region: 'r1', zone: 'z1', subzone: '' }, priority: 0, weight: endpoints.reduce((s, e) => s + e.weight, 0), endpoints },
      { locality: { region: 'r2', zone: '', subzone: 's' }, priority: 1, weight: 1, endpoints: [ep({ address: '10.9.9.9' })] },
    ],
  };
}

describe('codec', () => {
  it('encodes a CLA that Envoy’s ClusterLoadAssignment decodes field for field', () => {
    const cla = claOf([ep({ address: '10.0.0.1', port: 8080 }), ep({ address: 'fd00::1', port: 9090, weight: 5 })]);
    const T = messageType('envoy.config.endpoint.v3.ClusterLoadAssignment');
    const got = T.toObject(T.decode(encodeCla(cla)), { defaults: false }) as Record<string, unknown>;
    assert.deepEqual(JSON.parse(JSON.stringify(got)), {
      cluster_name: 'echo',
      endpoints: [
        {
          locality: { region: 'r1', zone: 'z1' },
          lb_endpoints: [
            { endpoint: { address: { socket_address: { address: '10.0.0.1', port_value: 8080 } } } },
            { endpoint: { address: { socket_address: { address: 'fd00::1', port_value: 9090 } } }, load_balancing_weight: { value: 5 } },
          ],
          load_balancing_weight: { value: 6 },
        },
        {
          locality: { region: 'r2', sub_zone: 's' },
          lb_endpoints: [{ endpoint: { address: { socket_address: { address: '10.9.9.9', port_value: 8080 } } } }],
          load_balancing_weight: { value: 1 },
          priority: 1,
        },
      ],
      policy: { overprovisioning_factor: { value: 140 } },
    });
  });

  it('spends no byte beyond what Envoy\'s nesting needs: 13 + address length per endpoint', () => {
    const one = (endpoints: Endpoint[]) =>
      encodeCla({ clusterName: 'echo', overprovisioningFactor: 140, groups: [{ locality: { region: 'r', zone: 'z', subzone: 's' }, priority: 0, weight: 100, endpoints }] }).length;
    const endpoints = Array.from({ length: 100 }, (_, i) => ep({ address: `10.1.0.${i}`, port: 8080 }));
    for (const extra of ['10.2.0.1', '192.168.100.200']) {
      const added = one([...endpoints, ep({ address: extra, port: 8080 })]) - one(endpoints);
      assert.equal(added, 13 + extra.length, extra);
    }
  });

  it('re-encodes only the endpoint that changed', () => {
    const endpoints = Array.from({ length: 50 }, () => ep());
    encodeCla(claOf(endpoints));
    const before = lbEndpointEncodeCount();
    const changed = [...endpoints];
    changed[7] = { ...(endpoints[7] as Endpoint), weight: 9 };
    encodeCla(claOf(changed));
    assert.equal(lbEndpointEncodeCount() - before, 2, 'the changed endpoint and the group-2 endpoint built fresh by claOf');
  });

  it('assembles a DiscoveryResponse around pre-encoded resources', () => {
    const cla = encodeCla(claOf([ep()]));
    const bytes = encodeDiscoveryResponse({ versionInfo: 'v1', typeUrl: ENDPOINT_TYPE, nonce: '7', resources: [encodeAny(ENDPOINT_TYPE, cla)] });
    const T = messageType('envoy.service.discovery.v3.DiscoveryResponse');
    const r = T.toObject(T.decode(bytes)) as { version_info: string; type_url: string; nonce: string; resources: { type_url: string; value: Uint8Array }[] };
    assert.equal(r.version_info, 'v1');
    assert.equal(r.nonce, '7');
    assert.equal(r.type_url, ENDPOINT_TYPE);
    assert.equal(r.resources[0]?.type_url, ENDPOINT_TYPE);
    assert.deepEqual(Buffer.from(r.resources[0]?.value ?? []), Buffer.from(cla));
  });

  it('decodes a DiscoveryRequest with node locality, metadata and error detail', () => {
    const T = messageType('envoy.service.discovery.v3.DiscoveryRequest');
    const bytes = T.encode(
      T.fromObject({
        version_info: 'v0',
        node: {
          id: 'n1',
          cluster: 'c',
          locality: { region: 'r', zone: 'z', sub_zone: 's' },
          metadata: { fields: { network: { stringValue: 'net1' }, labels: { structValue: { fields: { app: { stringValue: 'x' } } } } } },
        },
        resource_names: ['a', 'b'],
        type_url: ENDPOINT_TYPE,
        response_nonce: '3',
        error_detail: { code: 3, message: 'nope' },
      }),
    ).finish();
    const r = decodeDiscoveryRequest(bytes);
    assert.deepEqual(r.node?.locality, { region: 'r', zone: 'z', subzone: 's' });
    assert.deepEqual(r.node?.metadata, { network: 'net1', labels: { app: 'x' } });
    assert.deepEqual(r.resourceNames, ['a', 'b']);
    assert.equal(r.responseNonce, '3');
    assert.deepEqual(r.errorDetail, { code: 3, message: 'nope' });
  });

  it('encodes whole tree leaves (runs) to exactly the bytes of the endpoints one by one', () => {
    const mesh = new Mesh();
    const eps = ['r1/z1/s1', 'r1/z1/s1', 'r1/z1/s2', 'r1/z2/s1', 'r2/z1/s1'].map((l, i) => ep({ locality: l, weight: i + 1 }));
    mesh.put(service('svc', eps, lb('failover')));
    const s = mesh.get('svc');
    assert.ok(s);
    const cla = buildCla('svc', s.tree, s.spec.loadBalancing, planFor(s.tree, s.spec.loadBalancing, client({ locality: 'r1/z1/s1' })));
    assert.ok(cla.groups.every((g) => g.runs && g.runs.length > 0), 'region/zone/subzone trees group by leaf');
    const flat: Cla = { ...cla, groups: cla.groups.map(({ runs: _runs, ...g }) => g) };
    assert.deepEqual(Buffer.from(encodeCla(cla)), Buffer.from(encodeCla(flat)));
  });
});
