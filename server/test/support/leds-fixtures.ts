/** Fixtures shared by the LEDS unit tests: a 2 × 2 × 2 mesh, Envoy nodes, delta requests, decoding. */
import assert from 'node:assert/strict';
import { Mesh } from '../../src/domain/mesh.js';
import type { Endpoint } from '../../src/domain/service.js';
import { serverClaCache } from '../../src/resources/endpoint/endpoint.js';
import { canopyResources } from '../../src/resources/registry.js';
import type { DeltaDiscoveryRequest, NodeInfo } from '../../src/wire/request.js';
import { ep, service } from './builders.js';
import { envoyType } from './envoy-protos.js';
import { pgvCheckBytes } from './pgv.js';

export type Obj = Record<string, unknown>;

export const LOCALITIES = [
  'r1/z1/s1',
  'r1/z1/s2',
  'r1/z2/s1',
  'r1/z2/s2',
  'r2/z1/s1',
  'r2/z1/s2',
  'r2/z2/s1',
  'r2/z2/s2',
];

export function endpoints(): Endpoint[] {
  return LOCALITIES.flatMap((l, i) => [
    ep({ locality: l, address: `10.0.${i}.1` }),
    ep({ locality: l, address: `10.0.${i}.2` }),
  ]);
}

export function setup(leds = true) {
  const mesh = new Mesh();
  mesh.put(service('echo', endpoints()));
  return { mesh, registry: canopyResources(mesh, serverClaCache(), undefined, { leds }) };
}

export function envoyNode(metadata: Record<string, unknown> = {}): NodeInfo {
  return {
    id: 'e1',
    cluster: '',
    locality: { region: 'r1', zone: 'z1', subzone: 's1' },
    metadata,
    userAgentName: 'envoy',
  };
}

export function req(typeUrl: string, init: Partial<DeltaDiscoveryRequest> = {}): DeltaDiscoveryRequest {
  return { typeUrl, subscribe: [], unsubscribe: [], initialVersions: {}, responseNonce: '', ...init };
}

export function decodeDelta(bytes: Buffer): Obj {
  const t = envoyType('envoy.service.discovery.v3.DeltaDiscoveryResponse');
  return t.toObject(t.decode(bytes), { enums: String, longs: Number, arrays: true }) as Obj;
}

export function unpack(typeUrl: string, any: Obj): Obj {
  assert.equal(any['type_url'], typeUrl);
  const name = typeUrl.slice(typeUrl.lastIndexOf('/') + 1);
  const value = any['value'] as Uint8Array;
  assert.deepEqual(pgvCheckBytes(name, value), [], name);
  const t = envoyType(name);
  return t.toObject(t.decode(value), { enums: String, longs: Number, arrays: true }) as Obj;
}

export function deltaResources(bytes: Buffer): { name: string; version: string; msg: Obj }[] {
  const d = decodeDelta(bytes);
  const typeUrl = String(d['type_url']);
  return (d['resources'] as Obj[]).map((r) => ({
    name: String(r['name']),
    version: String(r['version']),
    msg: unpack(typeUrl, r['resource'] as Obj),
  }));
}
