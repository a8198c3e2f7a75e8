/**
 * The wire nonce is made from a response's content (wire-nonce.ts): streams
 * sending the same content send the same bytes whatever their history, and a
 * stream never reuses a nonce an answer may still name, nor the last one.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ENDPOINT_TYPE } from '../src/resources/type-urls.js';
import { DeltaSession } from '../src/sessions/delta-session.js';
import { handleNow } from '../src/sessions/session.js';
import { SotwSession } from '../src/sessions/sotw-session.js';
import { wireNonce } from '../src/sessions/wire-nonce.js';
import type { DiscoveryRequest, NodeInfo } from '../src/wire/request.js';
import { req } from './support/leds-fixtures.js';
import { oneEdsRegistry } from './support/region-streams.js';

const node: NodeInfo = {
  id: 'n',
  cluster: '',
  locality: { region: 'r1', zone: '', subzone: '' },
  metadata: {},
  userAgentName: '',
};

function sotw() {
  const content = { body: 'one' };
  const session = new SotwSession(
    1,
    'test',
    oneEdsRegistry(() => new TextEncoder().encode(content.body)),
  );
  const ask = (init: Partial<DiscoveryRequest> = {}) =>
    handleNow(session, {
      versionInfo: '',
      node,
      resourceNames: ['svc'],
      typeUrl: ENDPOINT_TYPE,
      responseNonce: '',
      ...init,
    });
  return { session, content, ask };
}

const acked = (s: SotwSession) => (s.status().types[0]!.resources ?? []).map((r) => r.state);

describe('wire nonce', () => {
  it('is short, the same for the same content, and suffixed when taken', () => {
    const n = wireNonce('k', 1, () => false);
    assert.match(n, /^[0-9a-z]{1,7}$/);
    assert.equal(
      wireNonce('k', 9, () => false),
      n,
    );
    assert.notEqual(
      wireNonce('other', 1, () => false),
      n,
    );
    const again = wireNonce('k', 40, (x) => x === n);
    assert.equal(again, `${n}.14`);
    assert.ok(again.length <= 12);
  });

  it('SotW: streams of different histories send byte-identical responses for the same content', () => {
    const a = sotw();
    const b = sotw();
    // Stream a has sent twice before (another content), stream b not at all.
    a.content.body = 'zero';
    const first = a.ask().responses[0]!;
    a.ask({ responseNonce: first.nonce, versionInfo: first.version });
    a.content.body = b.content.body = 'one';
    const ra = a.session.respond(ENDPOINT_TYPE, false)!;
    const rb = b.ask().responses[0]!;
    assert.equal(ra.nonce, rb.nonce);
    assert.deepEqual(ra.bytes, rb.bytes);
  });

  it('SotW: the same content twice in a row, or again while its nonce is unanswered, gets another nonce', () => {
    const { session, content, ask } = sotw();
    const one = ask().responses[0]!;
    const again = session.respond(ENDPOINT_TYPE, true)!;
    assert.equal(again.version, one.version);
    assert.notEqual(again.nonce, one.nonce, 'two consecutive identical-content responses never share a nonce');
    content.body = 'two';
    const two = session.respond(ENDPOINT_TYPE, false)!;
    content.body = 'one';
    const back = session.respond(ENDPOINT_TYPE, false)!;
    assert.equal(back.version, one.version);
    for (const n of [one.nonce, again.nonce, two.nonce]) assert.notEqual(back.nonce, n, 'unanswered nonces differ');
    // A late ACK of the first response is stale: only the last one's ACK acknowledges.
    assert.equal(ask({ responseNonce: one.nonce, versionInfo: one.version }).outcome.kind, 'stale');
    assert.deepEqual(acked(session), ['REQUESTED']);
    assert.equal(ask({ responseNonce: back.nonce, versionInfo: back.version }).outcome.kind, 'ack');
    assert.deepEqual(acked(session), ['ACKED'], "the ACK matched the last response's stamp (CSDS)");
  });

  it('SotW: a late NACK of an unanswered response is still settled', () => {
    const { session, content, ask } = sotw();
    const one = ask().responses[0]!;
    content.body = 'two';
    const two = session.respond(ENDPOINT_TYPE, false)!;
    assert.notEqual(two.nonce, one.nonce);
    const late = ask({ responseNonce: one.nonce, errorDetail: { code: 3, message: 'bad' } });
    assert.equal(late.outcome.kind, 'nack');
  });

  it('delta: the same content twice in a row, or while its nonce is outstanding, gets another nonce', () => {
    const session = new DeltaSession(
      1,
      'test',
      oneEdsRegistry(() => new TextEncoder().encode('one')),
    );
    const first = handleNow(session, req(ENDPOINT_TYPE, { node, subscribe: ['svc'] })).responses[0]!;
    const empty1 = session.respond(ENDPOINT_TYPE, true)!;
    const empty2 = session.respond(ENDPOINT_TYPE, true)!;
    assert.notEqual(empty1.nonce, first.nonce);
    assert.notEqual(empty2.nonce, empty1.nonce, 'two consecutive identical-content responses never share a nonce');
    // Each is outstanding: an ACK of the first still settles it (and only it, not the later ones).
    assert.equal(handleNow(session, req(ENDPOINT_TYPE, { responseNonce: first.nonce })).outcome.kind, 'ack');
    assert.equal(handleNow(session, req(ENDPOINT_TYPE, { responseNonce: empty2.nonce })).outcome.kind, 'ack');
    assert.equal(handleNow(session, req(ENDPOINT_TYPE, { responseNonce: empty1.nonce })).outcome.kind, 'stale');
  });
});
