/**
 * Every resource Canopy emits for every example config passes the PGV rules
 * in Envoy's protos, and its Listeners pass the invariants Envoy checks at
 * runtime. The CLAs are taken for a client in each endpoint's locality and
 * for a client with no locality, so every priority layout is covered; for
 * proxyless gRPC and for Envoy sidecars.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { load as parse } from 'js-yaml';
import type { Client } from '../src/domain/client.js';
import { emptyPlacement, type Placement } from '../src/domain/locality.js';
import { Mesh } from '../src/domain/mesh.js';
import { isSharedName } from '../src/domain/outbound.js';
import { parseConfig } from '../src/domain/spec.js';
import { packagePath } from '../src/platform/paths.js';
import { serverClaCache } from '../src/resources/endpoint/endpoint.js';
import { canopyResources } from '../src/resources/registry.js';
import { CLUSTER_TYPE, ENDPOINT_TYPE, LISTENER_TYPE, ROUTE_TYPE } from '../src/resources/type-urls.js';
import { flatten } from '../src/wire/rope.js';
import { envoyType } from './support/envoy-protos.js';
import { decodeListener, listenerInvariants } from './support/listener-invariants.js';
import { pgvCheckBytes } from './support/pgv.js';

const TYPES = [LISTENER_TYPE, ROUTE_TYPE, CLUSTER_TYPE, ENDPOINT_TYPE];
/** Every kind of client, and Envoy both on VIPs and on a local outbound address. */
const KINDS: Pick<Client, 'kind' | 'outboundAddress'>[] = [
  { kind: 'grpc' },
  { kind: 'envoy' },
  { kind: 'envoy', outboundAddress: '127.0.0.1' },
];

/** The example configs and the compose demo's mesh. */
function exampleConfigs(): string[] {
  return [packagePath('server', 'examples'), packagePath('deploy', 'compose')].flatMap((dir) =>
    readdirSync(dir)
      .filter((f) => f.endsWith('.yaml'))
      .map((f) => `${dir}/${f}`),
  );
}

/** The Any's value, checked to carry the type URL of its response. */
function unpackAny(bytes: Uint8Array, typeUrl: string): Uint8Array {
  const t = envoyType('google.protobuf.Any');
  const any = t.decode(bytes) as unknown as { type_url: string; value: Uint8Array };
  assert.equal(any.type_url, typeUrl);
  return any.value;
}

describe('Envoy conformance of what Canopy emits', () => {
  const files = exampleConfigs();
  it('has example configs to check', () => assert.ok(files.length > 0));
  for (const file of files) {
    it(`${file.slice(file.lastIndexOf('/') + 1)}: every resource passes PGV, listeners pass the invariants`, () => {
      const config = parseConfig(parse(readFileSync(file, 'utf8')));
      assert.ok(config.ok, JSON.stringify(!config.ok && config.errors));
      const mesh = new Mesh();
      for (const s of config.value.services) mesh.put(s);
      const registry = canopyResources(mesh, serverClaCache());
      const places: Placement[] = [emptyPlacement()];
      for (const s of config.value.services)
        for (const e of s.endpoints) places.push({ ...emptyPlacement(), locality: e.locality });
      for (const kind of KINDS) {
        const clients: Client[] = places.map((p) => ({ ...p, ...kind }));
        let checked = 0;
        const listeners: Record<string, unknown>[] = [];
        for (const type of TYPES) {
          const resources = registry.get(type);
          assert.ok(resources, type);
          for (const name of resources.names()) {
            for (const client of type === ENDPOINT_TYPE ? clients : clients.slice(0, 1)) {
              const r = resources.resolve(name, client);
              // An Envoy sidecar's listeners and routes are per outbound listener (domain/outbound.ts), a
              // service's own only when alone on it; listeners shared by several services are Envoy's alone.
              const layoutNamed = type === LISTENER_TYPE || type === ROUTE_TYPE;
              if (!r && layoutNamed && (kind.kind === 'envoy' || isSharedName(name))) continue;
              assert.ok(r, `${type} ${name}`);
              const value = unpackAny(flatten(r.any), type);
              assert.deepEqual(pgvCheckBytes(type, value), [], `${type} ${name}`);
              if (type === LISTENER_TYPE) listeners.push(decodeListener(value));
              checked++;
            }
          }
        }
        assert.ok(checked >= TYPES.length, 'at least one resource of each type');
        assert.deepEqual(listenerInvariants(listeners), [], JSON.stringify(kind));
      }
    });
  }
});
