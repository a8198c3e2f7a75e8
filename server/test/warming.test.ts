/**
 * Envoy's warming in the session state machines, driven directly over a
 * small in-memory registry whose Cluster type `warms` its endpoints: after a
 * Cluster update, the CLA is due again (takeDue) on SotW and delta, and on
 * SotW Envoy's re-request (same names, version and nonce: GrpcMuxImpl::addWatch)
 * is answered with it; once acknowledged, nothing more is sent.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { makeResource } from '../src/resources/resource.js';
import { ResourceRegistry } from '../src/resources/registry.js';
import type { ResourceType, Warms } from '../src/resources/resource-type.js';
import { CLUSTER_TYPE, ENDPOINT_TYPE } from '../src/resources/type-urls.js';
import { DeltaSession } from '../src/sessions/delta-session.js';
import { handleNow } from '../src/sessions/session.js';
import { SotwSession } from '../src/sessions/sotw-session.js';
import type { DeltaDiscoveryRequest, DiscoveryRequest } from '../src/wire/request.js';

function registry(content: Map<string, string>): ResourceRegistry {
  const type = (typeUrl: string, fullStateInSotw: boolean, pushRank: number, warms?: Warms['warms']): ResourceType => ({
    typeUrl,
    shortName: typeUrl,
    fullStateInSotw,
    pushRank,
    names: () => ['x'],
    resolve: (name) => {
      const body = content.get(`${typeUrl}/${name}`);
      return body === undefined ? undefined : makeResource(name, typeUrl, new TextEncoder().encode(body));
    },
    touchedBy: (s) => s,
    forget: () => {},
    ...(warms ? { warming: { warms } } : {}),
  });
  return new ResourceRegistry([
    type(CLUSTER_TYPE, true, 0, (name) => [{ typeUrl: ENDPOINT_TYPE, names: [name] }]),
    type(ENDPOINT_TYPE, false, 1),
  ]);
}

const sotw = (r: Partial<DiscoveryRequest> & { typeUrl: string }): DiscoveryRequest => ({
  versionInfo: '',
  resourceNames: [],
  responseNonce: '',
  ...r,
});
const delta = (r: Partial<DeltaDiscoveryRequest> & { typeUrl: string }): DeltaDiscoveryRequest => ({
  subscribe: [],
  unsubscribe: [],
  initialVersions: {},
  responseNonce: '',
  ...r,
});

describe('warming (xds_protocol.rst "Resource warming")', () => {
  it('SotW: a Cluster update makes its CLA due, and the re-request with the same names, version and nonce gets it', () => {
    const content = new Map([
      [`${CLUSTER_TYPE}/x`, 'cluster v1'],
      [`${ENDPOINT_TYPE}/x`, 'cla'],
    ]);
    const s = new SotwSession(1, 'test', registry(content));
    const cds = handleNow(s, sotw({ typeUrl: CLUSTER_TYPE })).responses[0]!;
    handleNow(s, sotw({ typeUrl: CLUSTER_TYPE, versionInfo: cds.version, responseNonce: cds.nonce }));
    const eds = handleNow(s, sotw({ typeUrl: ENDPOINT_TYPE, resourceNames: ['x'] })).responses[0]!;
    const reRequest = sotw({
      typeUrl: ENDPOINT_TYPE,
      resourceNames: ['x'],
      versionInfo: eds.version,
      responseNonce: eds.nonce,
    });
    assert.deepEqual(handleNow(s, reRequest).responses, [], 'an ACK of unchanged content is not answered');
    assert.deepEqual(s.takeDue(), []);

    content.set(`${CLUSTER_TYPE}/x`, 'cluster v2');
    const update = s.respond(CLUSTER_TYPE, false)!;
    assert.deepEqual(update.names, ['x']);
    assert.deepEqual(s.takeDue(), [ENDPOINT_TYPE], 'the CLA is due after the Cluster');
    // Envoy's re-request arrives before the server got to it: answered with the unchanged CLA.
    const answer = handleNow(s, reRequest).responses;
    assert.equal(answer.length, 1);
    assert.deepEqual(answer[0]!.names, ['x']);
    assert.equal(answer[0]!.version, eds.version, 'the same content, sent again');
    handleNow(
      s,
      sotw({
        typeUrl: ENDPOINT_TYPE,
        resourceNames: ['x'],
        versionInfo: answer[0]!.version,
        responseNonce: answer[0]!.nonce,
      }),
    );
    assert.equal(s.respond(ENDPOINT_TYPE, false), undefined, 'once acknowledged, nothing more');
    assert.equal(s.status().types.find((t) => t.typeUrl === ENDPOINT_TYPE)?.resources?.[0]?.state, 'ACKED');
  });

  it('delta: a Cluster update makes its CLA due and sent again, though the client sends nothing', () => {
    const content = new Map([
      [`${CLUSTER_TYPE}/x`, 'cluster v1'],
      [`${ENDPOINT_TYPE}/x`, 'cla'],
    ]);
    const s = new DeltaSession(1, 'test', registry(content));
    const cds = handleNow(s, delta({ typeUrl: CLUSTER_TYPE })).responses[0]!;
    handleNow(s, delta({ typeUrl: CLUSTER_TYPE, responseNonce: cds.nonce }));
    const eds = handleNow(s, delta({ typeUrl: ENDPOINT_TYPE, subscribe: ['x'] })).responses[0]!;
    handleNow(s, delta({ typeUrl: ENDPOINT_TYPE, responseNonce: eds.nonce }));
    s.takeDue();
    assert.equal(s.respond(ENDPOINT_TYPE, false), undefined);

    content.set(`${CLUSTER_TYPE}/x`, 'cluster v2');
    assert.deepEqual(s.respond(CLUSTER_TYPE, false)?.names, ['x']);
    assert.deepEqual(s.takeDue(), [ENDPOINT_TYPE]);
    const again = s.respond(ENDPOINT_TYPE, false)!;
    assert.deepEqual(again.names, ['x']);
    handleNow(s, delta({ typeUrl: ENDPOINT_TYPE, responseNonce: again.nonce }));
    assert.equal(s.respond(ENDPOINT_TYPE, false), undefined, 'once acknowledged, nothing more');
    assert.deepEqual(s.takeDue(), []);
  });

  it('a client reconnecting to a server whose Cluster changed gets the CLA it says it holds (SotW and delta)', () => {
    const content = new Map([
      [`${CLUSTER_TYPE}/x`, 'cluster v1'],
      [`${ENDPOINT_TYPE}/x`, 'cla'],
    ]);
    // What the client held from its first stream.
    const first = new DeltaSession(1, 'test', registry(content));
    const cds = handleNow(first, delta({ typeUrl: CLUSTER_TYPE })).responses[0]!;
    const eds = handleNow(first, delta({ typeUrl: ENDPOINT_TYPE, subscribe: ['x'] })).responses[0]!;
    const sotwFirst = new SotwSession(2, 'test', registry(content));
    const sotwCds = handleNow(sotwFirst, sotw({ typeUrl: CLUSTER_TYPE })).responses[0]!;
    const sotwEds = handleNow(sotwFirst, sotw({ typeUrl: ENDPOINT_TYPE, resourceNames: ['x'] })).responses[0]!;
    const held = (session: DeltaSession, typeUrl: string) => {
      const t = session.status().types.find((x) => x.typeUrl === typeUrl)!;
      return Object.fromEntries(t.resources!.map((r) => [r.name, r.version]));
    };
    const heldCds = held(first, CLUSTER_TYPE);
    const heldEds = held(first, ENDPOINT_TYPE);
    assert.ok(cds && eds && heldEds['x']);
    content.set(`${CLUSTER_TYPE}/x`, 'cluster v2');

    // Delta: the updated Cluster, then the CLA though its version matches what the client holds.
    const d = new DeltaSession(3, 'test', registry(content));
    assert.deepEqual(handleNow(d, delta({ typeUrl: CLUSTER_TYPE, initialVersions: heldCds })).responses[0]?.names, [
      'x',
    ]);
    const dEds = handleNow(d, delta({ typeUrl: ENDPOINT_TYPE, subscribe: ['x'], initialVersions: heldEds })).responses;
    assert.deepEqual(dEds[0]?.names, ['x']);
    // Without the Cluster change the CLA is not sent again.
    const quiet = new DeltaSession(4, 'test', registry(content));
    assert.deepEqual(
      handleNow(quiet, delta({ typeUrl: CLUSTER_TYPE, initialVersions: held(d, CLUSTER_TYPE) })).responses[0]?.names,
      [],
    );
    const again = handleNow(
      quiet,
      delta({ typeUrl: ENDPOINT_TYPE, subscribe: ['x'], initialVersions: heldEds }),
    ).responses;
    assert.deepEqual(again[0]?.names, []);

    // SotW: the EDS version_info the client holds is not taken at its word after the Cluster changed.
    const s = new SotwSession(5, 'test', registry(content));
    assert.deepEqual(handleNow(s, sotw({ typeUrl: CLUSTER_TYPE, versionInfo: sotwCds.version })).responses[0]?.names, [
      'x',
    ]);
    const sEds = handleNow(
      s,
      sotw({ typeUrl: ENDPOINT_TYPE, resourceNames: ['x'], versionInfo: sotwEds.version }),
    ).responses;
    assert.deepEqual(sEds[0]?.names, ['x']);
  });
});
