/**
 * The JSON descriptor the build writes (server/build-descriptor.mjs) stands in
 * for parsing Envoy's .proto files at startup: it must be there after a build
 * and describe exactly what the .proto files do.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ENVOY_FILES, loadEnvoyDescriptor, loadEnvoyProtos } from '../src/wire/protos.js';

describe('Envoy proto descriptor', () => {
  it('is built, and holds the same types as the .proto files', () => {
    const built = loadEnvoyDescriptor();
    assert.ok(built, 'npm run build writes dist/server/src/wire/envoy-descriptor.json');
    // Enum value options (deprecation notes) do not survive protobufjs's JSON round trip; nothing encodes them.
    const text = (r: ReturnType<typeof loadEnvoyProtos>) =>
      JSON.stringify(r.toJSON(), (key, value: unknown) => (key === 'valuesOptions' ? undefined : value));
    // Compared as text: a deepEqual failure on trees this size would take minutes to print.
    assert.ok(text(built) === text(loadEnvoyProtos(ENVOY_FILES)), 'the descriptor holds what the .proto files do');
  });

  it('encodes and decodes like the .proto files', () => {
    const built = loadEnvoyDescriptor()!;
    const parsed = loadEnvoyProtos(ENVOY_FILES);
    const name = 'envoy.config.cluster.v3.Cluster';
    const value = {
      name: 'svc',
      type: 'EDS',
      eds_cluster_config: { eds_config: { ads: {} } },
      connect_timeout: { seconds: 1, nanos: 5 },
      lb_policy: 'LEAST_REQUEST',
    };
    const a = built.lookupType(name);
    const b = parsed.lookupType(name);
    const bytes = a.encode(a.fromObject(value)).finish();
    assert.deepEqual(bytes, b.encode(b.fromObject(value)).finish());
    assert.deepEqual(a.toObject(a.decode(bytes), { enums: String }), b.toObject(b.decode(bytes), { enums: String }));
    assert.equal(a.toObject(a.decode(bytes), { enums: String })['lb_policy'], 'LEAST_REQUEST');
  });
});
