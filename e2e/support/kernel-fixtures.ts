/** Small builders for the kernel tests: services and placements from short strings. */
import { parseLocality, type Placement } from '../../server/src/domain/locality.js';
import { Mesh } from '../../server/src/domain/mesh.js';
import type { Endpoint, LbMode, ServiceSpec } from '../../server/src/domain/service.js';
import { contentHash } from '../../server/src/resources/resource.js';
import { decodeLocalityTree, encodeLocalityTree } from '../../server/src/resources/tree-codec.js';

export function placementOf(locality: string, labels: Record<string, string> = {}): Placement {
  return { locality: parseLocality(locality), network: '', node: '', cluster: '', labels };
}

/** A service on vip:port whose backends are [id, ip, "region/zone/subzone"] (the id is not part of the spec). */
export function spec(
  name: string,
  vip: string,
  port: number,
  mode: LbMode,
  backends: readonly (readonly [string, string, string])[],
): ServiceSpec {
  return {
    name,
    vip,
    port,
    loadBalancing: {
      mode,
      routingPreference: ['region', 'zone', 'subzone'],
      crossNetworkFailover: false,
      overprovisioningFactor: 140,
    },
    endpoints: backends.map(([, address, locality]): Endpoint => ({
      address,
      port,
      health: 'healthy',
      weight: 1,
      ...placementOf(locality),
    })),
  };
}

/** The edit tests' five real backends on 127.0.N.x as [id, ip, locality]: three in r1/z1/s1, one in r1/z1/s2, one far. */
export function editBackends(n: number) {
  return [
    ['a1', `127.0.${n}.1`, 'r1/z1/s1'],
    ['a2', `127.0.${n}.2`, 'r1/z1/s1'],
    ['a3', `127.0.${n}.3`, 'r1/z1/s1'],
    ['m1', `127.0.${n}.11`, 'r1/z1/s2'],
    ['n1', `127.0.${n}.21`, 'r9/z9/s9'],
  ] as const;
}

/** One of `backends` by id, as a healthy endpoint of weight 1 on `port`. */
export function backendEndpoint(backends: ReturnType<typeof editBackends>, id: string, port: number): Endpoint {
  const [, address, locality] = backends.find(([x]) => x === id)!;
  return { address, port, health: 'healthy', weight: 1, ...placementOf(locality) };
}

/** `count` endpoints on 10.N.x.y over `leaves` subzones of regions r2–r5, never connected to: the tree is big, an edit is not. */
export function bulkEndpoints(n: number, port: number, count: number, leaves: number): Endpoint[] {
  return Array.from({ length: count }, (_, i) => ({
    address: `10.${n}.${i >> 8}.${i & 255}`,
    port,
    health: 'healthy',
    weight: 1,
    ...placementOf(`r${2 + (i % 4)}/z${i % 5}/s${i % leaves}`),
  }));
}

/** A 3-level failover service on vip:port with these endpoints, as the edit tests build it. */
export function failoverSpec(name: string, vip: string, port: number, endpoints: readonly Endpoint[]): ServiceSpec {
  return {
    name,
    vip,
    port,
    loadBalancing: {
      mode: 'failover',
      routingPreference: ['region', 'zone', 'subzone'],
      crossNetworkFailover: false,
      overprovisioningFactor: 140,
    },
    endpoints: [...endpoints],
  };
}

/** The tree a node agent is sent for `s`, as the datapath takes it: compiled, encoded, decoded and hashed. */
export function treeUpdate(s: ServiceSpec) {
  const mesh = new Mesh();
  mesh.put(s);
  const st = mesh.get(s.name)!;
  const bytes = encodeLocalityTree(st.spec, st.tree.compile());
  return { tree: decodeLocalityTree(bytes), hash: contentHash(bytes) };
}
