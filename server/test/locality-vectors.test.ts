/**
 * Worked cases from ztunnel and Kmesh (../shared/locality-vectors.json),
 * translated into Canopy's model and checked against the CLA it builds.
 * Istio and Kuma vectors belong to the policy-parity issue.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { buildCla } from '../src/domain/cla.js';
import { parseLocality, type Placement, type Scope } from '../src/domain/locality.js';
import { Mesh } from '../src/domain/mesh.js';
import { planFor } from '../src/domain/priorities.js';
import { endpointKey, type Endpoint, type LbMode } from '../src/domain/service.js';

interface VectorPlacement {
  locality?: string | null;
  network?: string;
  node?: string;
  cluster?: string;
  labels?: Record<string, string>;
}
interface VectorEndpoint extends VectorPlacement {
  id: string;
  noAddress?: boolean;
}
interface Vector {
  id: string;
  description: string;
  policy: { system: string; mode?: string; routingPreference?: string[] };
  client: VectorPlacement;
  endpoints: VectorEndpoint[];
  expect: {
    priorities?: Record<string, number>;
    compacted?: Record<string, number>;
    selected?: string[];
    dropped?: string[];
  };
}

const VECTORS_URL = new URL('../../../../shared/locality-vectors.json', import.meta.url);
const vectors = (JSON.parse(readFileSync(VECTORS_URL, 'utf8')) as { vectors: Vector[] }).vectors;

const SCOPES: Record<string, Scope> = {
  NETWORK: 'network',
  REGION: 'region',
  ZONE: 'zone',
  SUBZONE: 'subzone',
  NODE: 'node',
  CLUSTER: 'cluster',
};

function placement(v: VectorPlacement): Placement {
  return {
    locality: parseLocality(v.locality),
    network: v.network ?? '',
    node: v.node ?? '',
    cluster: v.cluster ?? '',
    labels: v.labels ?? {},
  };
}

/** ztunnel/Kmesh policy → Canopy service; endpoints without an address cannot be in a CLA. */
function translate(v: Vector): { endpoints: Map<string, Endpoint>; unaddressed: string[]; mode: LbMode; scopes: Scope[] } {
  const mode = (v.policy.mode ?? 'FAILOVER').toLowerCase() as LbMode;
  const scopes = (v.policy.routingPreference ?? ['REGION', 'ZONE', 'SUBZONE']).map((s) => {
    const scope = SCOPES[s];
    assert.ok(scope, `${v.id}: unknown scope ${s}`);
    return scope;
  });
  const endpoints = new Map<string, Endpoint>();
  const unaddressed: string[] = [];
  v.endpoints.forEach((e, i) => {
    if (e.noAddress) return void unaddressed.push(e.id);
    endpoints.set(e.id, { ...placement(e), address: `10.0.0.${i + 1}`, port: 80, health: 'healthy', weight: 1 });
  });
  return { endpoints, unaddressed, mode, scopes };
}

function run(v: Vector): { priorities: Record<string, number>; absent: string[] } {
  const { endpoints, unaddressed, mode, scopes } = translate(v);
  const mesh = new Mesh();
  mesh.put({
    name: v.id,
    loadBalancing: { mode, routingPreference: scopes, crossNetworkFailover: true, overprovisioningFactor: 140 },
    endpoints: [...endpoints.values()],
  });
  const s = mesh.get(v.id);
  assert.ok(s);
  const cla = buildCla(v.id, s.tree, s.spec.loadBalancing, planFor(s.tree, s.spec.loadBalancing, placement(v.client)));
  const idOf = new Map([...endpoints].map(([id, e]) => [endpointKey(e), id]));
  const priorities: Record<string, number> = {};
  for (const g of cla.groups) for (const e of g.endpoints) priorities[idOf.get(endpointKey(e)) ?? '?'] = g.priority;
  const absent = [...unaddressed, ...[...endpoints.keys()].filter((id) => !(id in priorities))];
  return { priorities, absent };
}

describe('locality vectors: ztunnel and Kmesh', () => {
  const ours = vectors.filter((v) => v.policy.system === 'ztunnel' || v.policy.system === 'kmesh');
  it('the vector file holds ztunnel and Kmesh cases', () => assert.ok(ours.length >= 5, `${ours.length} vectors`));
  for (const v of ours) {
    it(`${v.id}: ${v.description}`, () => {
      const got = run(v);
      // Kmesh gives raw prios (levels not matched); a CLA carries them compacted.
      const want = v.expect.compacted ?? v.expect.priorities ?? {};
      assert.deepEqual(got.priorities, want);
      for (const id of v.expect.dropped ?? []) assert.ok(got.absent.includes(id), `${id} should be dropped`);
      if (v.expect.selected) {
        const best = Object.keys(got.priorities).filter((id) => got.priorities[id] === 0);
        assert.deepEqual(best.sort(), [...v.expect.selected].sort());
      }
    });
  }
});
