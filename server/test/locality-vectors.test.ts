/**
 * Worked cases from Istio, Kuma, ztunnel, Kmesh and Kubernetes
 * (fixtures/locality-vectors.json, the repository's copy of the shared
 * vectors, plus any new ones in ../shared/locality-vectors.json when it sits
 * beside the clone; and fixtures/policy-vectors.json written
 * from each system's own tests and docs). Each vector's policy is written as
 * that system's documents (a DestinationRule and a ServiceEntry; a
 * MeshLoadBalancingStrategy and Dataplanes; a Service and an EndpointSlice;
 * ztunnel and Kmesh scopes are Canopy's own config), run through the importer
 * of its system, and the CLA Canopy builds is compared with the expectation.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ClaCache } from '../src/domain/cla-cache.js';
import { Mesh } from '../src/domain/mesh.js';
import { importDocuments } from '../src/policy/import.js';
import {
  assertVector,
  documentsText,
  extra,
  mergeVectors,
  outcomeOf,
  shared,
  SHARED_VECTORS_FILE,
  sharedBeside,
  sharedCopy,
  SYSTEMS,
  type Vector,
} from './support/vector-documents.js';

function run(v: Vector) {
  const how = SYSTEMS[v.policy.system];
  assert.ok(how, `${v.id}: no importer for ${v.policy.system}`);
  const text = documentsText(v);
  const imported = importDocuments([{ name: `${v.id}.yaml`, text }], how.system);
  assert.ok(imported.result.ok, `${v.id}: ${JSON.stringify(!imported.result.ok && imported.result.errors)}`);
  const [spec] = imported.result.value.services;
  assert.ok(spec);
  const mesh = new Mesh();
  mesh.put(spec);
  const entry = new ClaCache(() => new Uint8Array()).lookup(mesh.get(spec.name)!, how.client(v.client));
  const got = outcomeOf(
    v,
    entry.cla.groups.map((g) => ({ priority: g.priority, weight: g.weight, endpoints: g.endpoints })),
    entry.cla.overprovisioningFactor,
  );
  return { ...got, cla: entry.cla, notes: imported.notes };
}

describe('locality vectors, through each system’s importer', () => {
  const all = [...shared, ...extra];
  it('the repository’s copy of the shared vectors holds every system', (t) => {
    // A clone alone runs the copy; CI, with ../shared beside the clone, runs what is new there too.
    t.diagnostic(
      sharedBeside.length > 0
        ? `${SHARED_VECTORS_FILE}: ${sharedBeside.length} vectors beside the clone, ${shared.length - sharedCopy.length} not in the copy`
        : `no ${SHARED_VECTORS_FILE} beside the clone: the repository's copy alone (${sharedCopy.length} vectors)`,
    );
    for (const s of ['istio', 'kuma', 'ztunnel', 'kmesh'])
      assert.ok(
        sharedCopy.some((v) => v.policy.system === s),
        s,
      );
    assert.ok(sharedCopy.length >= 15, `${sharedCopy.length} shared vectors`);
  });
  it('vectors beside the clone add the new ones and the changed ones, not the copies', () => {
    const [a, b] = sharedCopy;
    assert.ok(a && b);
    const changed = { ...b, description: `${b.description}, reworded` };
    const added = { ...a, id: 'new-vector' };
    const merged = mergeVectors([a, b], [a, changed, added]);
    assert.deepEqual(
      merged.map((v) => v.id),
      [a.id, b.id, `${b.id}-shared`, 'new-vector'],
    );
  });
  for (const v of all) {
    it(`${v.id}: ${v.description}`, () => {
      const got = run(v);
      assertVector(v, got);
      for (const g of got.cla.groups) assert.ok(g.weight >= 1, 'no weightless locality');
    });
  }
  it('Istio failover without outlierDetection is said in the import notes', () => {
    const v = extra.find((x) => x.id === 'istio-x4')!;
    assert.ok(run(v).notes.some((n) => /outlierDetection/.test(n.message)));
  });
});
