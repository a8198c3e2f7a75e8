/**
 * A re-created service: a proxyless client's route names the incarnation's
 * cluster, which exists (with the service's endpoints) while an earlier
 * incarnation's does not; Envoy and a service never deleted see the service's
 * name; a change to the service touches every name a client may hold.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Client } from '../src/domain/client.js';
import { emptyPlacement } from '../src/domain/locality.js';
import { Mesh } from '../src/domain/mesh.js';
import { serverClaCache } from '../src/resources/endpoint/endpoint.js';
import { parseIncarnatedName } from '../src/resources/incarnations.js';
import { canopyResources } from '../src/resources/registry.js';
import type { Resource } from '../src/resources/resource.js';
import { CLUSTER_TYPE, ROUTE_TYPE } from '../src/resources/type-urls.js';
import { flatten } from '../src/wire/rope.js';
import { ep, service } from './support/builders.js';
import { envoyType } from './support/envoy-protos.js';

type Obj = Record<string, unknown>;
const grpc: Client = { ...emptyPlacement(), locality: { region: 'r1', zone: 'z1', subzone: 's1' }, kind: 'grpc' };
const envoy: Client = { ...grpc, kind: 'envoy' };

function decoded(typeUrl: string, r: Resource | undefined): Obj {
  assert.ok(r, 'resource exists');
  const any = envoyType('google.protobuf.Any').decode(flatten(r.any)) as unknown as { value: Uint8Array };
  const t = envoyType(typeUrl.slice(typeUrl.lastIndexOf('/') + 1));
  return t.toObject(t.decode(any.value), { enums: String, arrays: true }) as Obj;
}

const routeCluster = (route: Obj): unknown =>
  (((route['virtual_hosts'] as Obj[])[0]!['routes'] as Obj[])[0]!['route'] as Obj)['cluster'];

function setup() {
  const mesh = new Mesh();
  // A port: an Envoy sidecar has a listener, and so a route configuration, only for a service with one.
  const spec = { ...service('echo', [ep({ locality: 'r1/z1/s1' })]), port: 8080 };
  mesh.put(spec);
  const registry = canopyResources(mesh, serverClaCache());
  const recreate = () => {
    mesh.delete('echo');
    registry.forget('echo');
    mesh.put(spec);
  };
  return { registry, recreate };
}

describe('a re-created service', () => {
  it('is routed by the service name until it is deleted', () => {
    const { registry } = setup();
    assert.equal(routeCluster(decoded(ROUTE_TYPE, registry.get(ROUTE_TYPE)!.resolve('echo', grpc))), 'echo');
    assert.equal(registry.get(CLUSTER_TYPE)!.resolve('echo@incarnation-1', grpc), undefined);
  });

  it("routes proxyless clients to its incarnation's cluster, whose endpoints are the service's", () => {
    const { registry, recreate } = setup();
    recreate();
    const route = decoded(ROUTE_TYPE, registry.get(ROUTE_TYPE)!.resolve('echo', grpc));
    assert.equal(routeCluster(route), 'echo@incarnation-1');
    const c = decoded(CLUSTER_TYPE, registry.get(CLUSTER_TYPE)!.resolve('echo@incarnation-1', grpc));
    assert.equal(c['name'], 'echo@incarnation-1');
    assert.equal((c['eds_cluster_config'] as Obj)['service_name'], 'echo');
    assert.ok(registry.get(CLUSTER_TYPE)!.resolve('echo', grpc), 'the plain name stays valid');
    recreate();
    assert.equal(
      routeCluster(decoded(ROUTE_TYPE, registry.get(ROUTE_TYPE)!.resolve('echo', grpc))),
      'echo@incarnation-2',
    );
    assert.equal(registry.get(CLUSTER_TYPE)!.resolve('echo@incarnation-1', grpc), undefined, 'an earlier one is gone');
  });

  it('keeps Envoy on the service name (its clusters come by wildcard)', () => {
    const { registry, recreate } = setup();
    recreate();
    assert.equal(routeCluster(decoded(ROUTE_TYPE, registry.get(ROUTE_TYPE)!.resolve('echo', envoy))), 'echo');
    assert.equal(registry.get(CLUSTER_TYPE)!.resolve('echo@incarnation-1', envoy), undefined);
    assert.deepEqual(registry.get(CLUSTER_TYPE)!.names(), ['echo']);
  });

  it('touches the current and the previous incarnation on a change', () => {
    const { registry, recreate } = setup();
    recreate();
    recreate();
    const touched = registry.touchedBy(new Set(['echo'])).get(CLUSTER_TYPE)!;
    assert.deepEqual([...touched].sort(), ['echo', 'echo@incarnation-1', 'echo@incarnation-2']);
  });

  it('reads a cluster name back, a malformed suffix as a plain name', () => {
    assert.deepEqual(parseIncarnatedName('echo@incarnation-3'), { service: 'echo', incarnation: 3 });
    assert.deepEqual(parseIncarnatedName('echo'), { service: 'echo' });
    assert.deepEqual(parseIncarnatedName('echo@incarnation-x'), { service: 'echo@incarnation-x' });
  });
});
