/**
 * Lazy xDS: a sidecar's wildcard LDS/CDS holds only its demand set (what it
 * declares plus what it asks for by name), a name it stops asking for leaves
 * after the unused timeout, the set survives a reconnect, and the mesh-wide
 * switch and the per-node override pick lazy or full (full by default).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DemandSet, type LazySettings } from '../src/domain/demand.js';
import { Mesh } from '../src/domain/mesh.js';
import { serverClaCache } from '../src/resources/endpoint/endpoint.js';
import { canopyResources } from '../src/resources/registry.js';
import { CLUSTER_TYPE, LISTENER_TYPE } from '../src/resources/type-urls.js';
import { DeltaSession } from '../src/sessions/delta-session.js';
import { SotwSession } from '../src/sessions/sotw-session.js';
import { handleNow, refreshNow, type OutgoingResponse } from '../src/sessions/session.js';
import type { NodeInfo } from '../src/wire/request.js';
import { ep, service } from './support/builders.js';
import { envoyType } from './support/envoy-protos.js';

const SERVICES = Array.from({ length: 20 }, (_, i) => `svc-${i}`);

function registry(lazy?: LazySettings) {
  const mesh = new Mesh();
  // Each on its own port: a stock sidecar's listener for it is its own, named after it (domain/outbound.ts).
  // svc-10 and on speak TCP: on delta a lazy sidecar's listeners hold every HTTP service (on demand), TCP ones by demand.
  SERVICES.forEach((name, i) =>
    mesh.put({
      ...service(name, [ep({ locality: 'r1/z1/s1' })]),
      port: 8080 + i,
      vip: `10.0.0.${i + 1}`,
      ...(i >= 10 ? { protocol: 'tcp' as const } : {}),
    }),
  );
  return canopyResources(mesh, serverClaCache(), lazy);
}

function node(id: string, metadata: Record<string, unknown> = {}): NodeInfo {
  return { id, cluster: '', locality: { region: 'r1', zone: 'z1', subzone: 's1' }, metadata, userAgentName: 'envoy' };
}

function delta(r: OutgoingResponse | undefined): { names: string[]; removed: string[] } {
  assert.ok(r, 'a response');
  const t = envoyType('envoy.service.discovery.v3.DeltaDiscoveryResponse');
  const m = t.toObject(t.decode(r.bytes), { arrays: true }) as {
    resources: { name: string }[];
    removed_resources: string[];
  };
  return { names: m.resources.map((x) => x.name).sort(), removed: [...m.removed_resources].sort() };
}

function sotwNames(r: OutgoingResponse | undefined): string[] {
  assert.ok(r, 'a response');
  const t = envoyType('envoy.service.discovery.v3.DiscoveryResponse');
  const m = t.decode(r.bytes) as unknown as { resources: { value: Uint8Array }[] };
  const c = envoyType('envoy.config.cluster.v3.Cluster');
  return m.resources.map((a) => (c.decode(a.value) as unknown as { name: string }).name).sort();
}

const ON: LazySettings = { enabled: true, unusedTimeoutMs: 60_000 };

describe('DemandSet', () => {
  it('holds declared names, names in use, and released names until their timeout', () => {
    const d = new DemandSet(['a'], 1000);
    d.use(['b']);
    d.use(['b']);
    d.release(['b'], 0);
    assert.equal(d.has('b', 5000), true, 'still named by one subscription');
    d.release(['b'], 100);
    assert.deepEqual(d.filter(['a', 'b', 'c'], 1099), ['a', 'b']);
    assert.deepEqual(d.filter(['a', 'b', 'c'], 1100), ['a']);
    d.use(['b']);
    assert.equal(d.has('b', 9999), true, 'asked for again');
  });
});

describe('lazy xDS in the sessions', () => {
  it('is off by default: a wildcard CDS gets every service', () => {
    const s = new SotwSession(1, 't', registry());
    const { responses } = handleNow(s, {
      versionInfo: '',
      node: node('n', { 'canopy.demand': 'svc-1' }),
      resourceNames: [],
      typeUrl: CLUSTER_TYPE,
      responseNonce: '',
    });
    assert.equal(sotwNames(responses[0]).length, SERVICES.length);
  });

  it('SotW: a lazy node gets only what it declares; the per-node override turns it off', () => {
    const reg = registry(ON);
    const lazy = new SotwSession(1, 't', reg);
    const r = handleNow(lazy, {
      versionInfo: '',
      node: node('a', { 'canopy.demand': ['svc-1', 'svc-2'] }),
      resourceNames: [],
      typeUrl: CLUSTER_TYPE,
      responseNonce: '',
    });
    assert.deepEqual(sotwNames(r.responses[0]), ['svc-1', 'svc-2']);
    const full = new SotwSession(2, 't', reg);
    const f = handleNow(full, {
      versionInfo: '',
      node: node('b', { 'canopy.lazy': false }),
      resourceNames: [],
      typeUrl: CLUSTER_TYPE,
      responseNonce: '',
    });
    assert.equal(sotwNames(f.responses[0]).length, SERVICES.length);
  });

  it('SotW: a name subscribed on CDS joins the demand set and its listener is due on the wildcard LDS at once', () => {
    const s = new SotwSession(3, 't', registry(ON));
    const lds = handleNow(s, {
      versionInfo: '',
      node: node('c', { 'canopy.demand': ['svc-1'] }),
      resourceNames: [],
      typeUrl: LISTENER_TYPE,
      responseNonce: '',
    }).responses[0]!;
    // The demanded service's listener, and the virtual outbound listener every transparent-capture sidecar gets.
    assert.deepEqual(lds.names, ['svc-1', 'outbound|virtual']);
    const cds = handleNow(s, { versionInfo: '', resourceNames: ['svc-5'], typeUrl: CLUSTER_TYPE, responseNonce: '' });
    assert.deepEqual(sotwNames(cds.responses[0]), ['svc-5']);
    assert.deepEqual(s.takeDue(), [LISTENER_TYPE]);
    assert.deepEqual([...s.respond(LISTENER_TYPE, false)!.names].sort(), ['outbound|virtual', 'svc-1', 'svc-5']);
  });

  it('delta: on-demand names join, leave after the unused timeout, and survive a reconnect', () => {
    const reg = registry({ enabled: true, unusedTimeoutMs: 0 });
    const n = node('sidecar', { 'canopy.demand': 'svc-1' });
    const s = new DeltaSession(1, 't', reg);
    const first = handleNow(s, {
      node: n,
      typeUrl: CLUSTER_TYPE,
      subscribe: ['*'],
      unsubscribe: [],
      initialVersions: {},
      responseNonce: '',
    });
    assert.deepEqual(delta(first.responses[0]).names, ['svc-1']);
    const nonce1 = first.responses[0]!.nonce;
    // On-demand CDS: Envoy subscribes to a cluster by name.
    const od = handleNow(s, {
      typeUrl: CLUSTER_TYPE,
      subscribe: ['svc-17'],
      unsubscribe: [],
      initialVersions: {},
      responseNonce: nonce1,
    });
    assert.deepEqual(delta(od.responses[0]).names, ['svc-17']);
    const l = handleNow(s, {
      typeUrl: LISTENER_TYPE,
      subscribe: ['*'],
      unsubscribe: [],
      initialVersions: {},
      responseNonce: '',
    });
    // TCP listeners follow the same demand set; every HTTP service has its listener, whose on_demand filter
    // fetches a missing cluster; beside them the virtual listener captured traffic arrives on.
    const http = SERVICES.slice(0, 10);
    assert.deepEqual(delta(l.responses[0]).names, ['outbound|virtual', ...http, 'svc-17'].sort());
    // A reconnect: the new stream's wildcard still holds svc-17 (named by the old stream, not released yet).
    const again = new DeltaSession(2, 't', reg);
    const r2 = handleNow(again, {
      node: n,
      typeUrl: CLUSTER_TYPE,
      subscribe: ['*'],
      unsubscribe: [],
      initialVersions: {},
      responseNonce: '',
    });
    assert.deepEqual(delta(r2.responses[0]).names, ['svc-1', 'svc-17']);
    // Unsubscribed on the old stream and that stream gone: unused (timeout 0), so removed at the next push.
    handleNow(s, {
      typeUrl: CLUSTER_TYPE,
      subscribe: [],
      unsubscribe: ['svc-17'],
      initialVersions: {},
      responseNonce: od.responses[0]!.nonce,
    });
    s.closed();
    const pushed = refreshNow(again);
    assert.deepEqual(delta(pushed[0]).removed, ['svc-17']);
  });
});
