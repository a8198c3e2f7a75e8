/**
 * kube-proxy's fallback to terminating endpoints, in the service state every
 * CLA (gRPC, Envoy, LEDS, the kernel tree) is built from: terminating
 * endpoints are served exactly while no endpoint of the service is healthy.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Mesh } from '../src/domain/mesh.js';
import type { Endpoint, Health, ServiceSpec } from '../src/domain/service.js';

const ep = (i: number, health: Health): Endpoint => ({
  address: `10.0.0.${i}`,
  port: 80,
  locality: { region: '', zone: 'za', subzone: '' },
  network: '',
  node: '',
  cluster: '',
  labels: {},
  health,
  weight: 1,
});

const spec = (endpoints: Endpoint[]): ServiceSpec => ({
  name: 'web',
  loadBalancing: {
    mode: 'failover',
    routingPreference: ['zone'],
    crossNetworkFailover: true,
    overprovisioningFactor: 140,
  },
  endpoints,
});

const served = (mesh: Mesh) => mesh.get('web')!.tree.size;
const parked = (mesh: Mesh) => [...mesh.get('web')!.parked()].map((e) => e.address);

describe('terminating endpoints (kube-proxy fallback)', () => {
  it('serve while no endpoint is healthy, and stop when one is', () => {
    const mesh = new Mesh();
    mesh.put(spec([ep(1, 'terminating'), ep(2, 'terminating'), ep(3, 'unhealthy')]));
    assert.equal(served(mesh), 2);
    assert.deepEqual(parked(mesh), ['10.0.0.3']);
    assert.equal(mesh.get('web')!.fallback, true);
    // The new pod becomes ready: the terminating ones drain.
    mesh.patch('web', [ep(3, 'healthy')]);
    assert.equal(served(mesh), 1);
    assert.deepEqual(parked(mesh), ['10.0.0.1', '10.0.0.2']);
    // It fails: back to the terminating ones rather than nothing.
    mesh.patch('web', [], ['10.0.0.3:80']);
    assert.equal(served(mesh), 2);
    mesh.patch('web', [ep(1, 'unhealthy')]);
    assert.equal(served(mesh), 1);
  });

  it('a healthy endpoint first keeps a later terminating one out', () => {
    const mesh = new Mesh();
    mesh.put(spec([ep(1, 'healthy'), ep(2, 'terminating')]));
    assert.equal(served(mesh), 1);
    mesh.put(spec([ep(2, 'terminating')]));
    assert.equal(served(mesh), 1);
    assert.deepEqual(parked(mesh), []);
  });
});
