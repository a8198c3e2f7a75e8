/**
 * The per-stream protocol state machine, driven directly. Every response is
 * checked for the invariants a client relies on: the type URL it asked for,
 * a version, and a short nonce unlike the last one of its type (a nonce is
 * made from the content, wire-nonce.ts).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Placement } from '../src/domain/locality.js';
import type { DiscoveryRequest } from '../src/wire/request.js';
import { makeResource, type Resource } from '../src/resources/resource.js';
import { ResourceRegistry } from '../src/resources/registry.js';
import type { ResourceType } from '../src/resources/resource-type.js';
import { handleNow, refreshNow } from '../src/sessions/session.js';
import { SotwSession, type OutgoingResponse } from '../src/sessions/sotw-session.js';
import { CLUSTER_TYPE, ENDPOINT_TYPE } from '../src/resources/type-urls.js';

/** A mutable in-memory source: name → content per type, served as CDS (full state) and EDS (not). */
class FakeSource {
  readonly content = new Map<string, Map<string, string>>();
  /** How many names were resolved so far. */
  resolves = 0;
  readonly registry = new ResourceRegistry([this.type(CLUSTER_TYPE, true, 0), this.type(ENDPOINT_TYPE, false, 1)]);
  private type(typeUrl: string, fullStateInSotw: boolean, pushRank: number): ResourceType {
    return {
      typeUrl,
      shortName: typeUrl,
      fullStateInSotw,
      pushRank,
      names: () => [...(this.content.get(typeUrl)?.keys() ?? [])],
      resolve: (name: string, _client: Placement): Resource | undefined => {
        this.resolves++;
        const body = this.content.get(typeUrl)?.get(name);
        return body === undefined ? undefined : makeResource(name, typeUrl, new TextEncoder().encode(body));
      },
      touchedBy: (services) => services,
      forget: () => {},
    };
  }
  set(typeUrl: string, name: string, body: string | undefined): void {
    const m = this.content.get(typeUrl) ?? new Map<string, string>();
    this.content.set(typeUrl, m);
    if (body === undefined) m.delete(name);
    else m.set(name, body);
  }
}

class Harness {
  readonly source = new FakeSource();
  readonly stream = new SotwSession(1, 'test', this.source.registry);
  private readonly lastNonce = new Map<string, string>();
  readonly sent: OutgoingResponse[] = [];

  request(req: Partial<DiscoveryRequest> & { typeUrl: string }) {
    const full: DiscoveryRequest = { versionInfo: '', resourceNames: [], responseNonce: '', ...req };
    const result = handleNow(this.stream, full);
    this.check(result.responses, req.typeUrl);
    return result;
  }

  refresh(): OutgoingResponse[] {
    const out = refreshNow(this.stream);
    this.check(out);
    return out;
  }

  private check(responses: readonly OutgoingResponse[], typeUrl?: string): void {
    for (const r of responses) {
      if (typeUrl) assert.equal(r.typeUrl, typeUrl);
      assert.ok(r.version.length > 0, 'version set');
      assert.match(r.nonce, /^[0-9a-z.]{1,12}$/, 'a short ASCII nonce');
      assert.notEqual(r.nonce, this.lastNonce.get(r.typeUrl), 'a nonce unlike the last one of its type');
      this.lastNonce.set(r.typeUrl, r.nonce);
      this.sent.push(r);
    }
  }
}

describe('SotwSession', () => {
  it('wildcard CDS carries full state; ACK is silent; unchanged content sends nothing', () => {
    const h = new Harness();
    h.source.set(CLUSTER_TYPE, 'a', 'A1');
    h.source.set(CLUSTER_TYPE, 'b', 'B1');
    const first = h.request({ typeUrl: CLUSTER_TYPE, node: nodeAt('r1') });
    assert.equal(first.outcome.kind, 'initial');
    assert.equal(first.responses[0]?.names.length, 2);
    const r = first.responses[0]!;
    const ack = h.request({ typeUrl: CLUSTER_TYPE, versionInfo: r.version, responseNonce: r.nonce });
    assert.equal(ack.outcome.kind, 'ack');
    assert.deepEqual(ack.responses, []);
    assert.deepEqual(h.refresh(), []);
    h.source.set(CLUSTER_TYPE, 'b', 'B2');
    const pushed = h.refresh();
    assert.equal(pushed[0]?.names.length, 2, 'LDS/CDS responses carry full state');
    assert.equal(h.stream.status().types[0]?.versionAcked, r.version);
  });

  it('EDS sends only the resources whose bytes changed, plus new subscriptions', () => {
    const h = new Harness();
    h.source.set(ENDPOINT_TYPE, 'a', 'A1');
    h.source.set(ENDPOINT_TYPE, 'b', 'B1');
    const r1 = h.request({ typeUrl: ENDPOINT_TYPE, resourceNames: ['a', 'b'] }).responses[0]!;
    assert.equal(r1.names.length, 2);
    h.source.set(ENDPOINT_TYPE, 'a', 'A2');
    const [r2] = h.refresh();
    assert.equal(r2?.names.length, 1);
    assert.notEqual(r2?.version, r1.version);
    h.source.set(ENDPOINT_TYPE, 'c', 'C1');
    const sub = h.request({
      typeUrl: ENDPOINT_TYPE,
      versionInfo: r2!.version,
      responseNonce: r2!.nonce,
      resourceNames: ['a', 'b', 'c'],
    });
    assert.equal(sub.responses[0]?.names.length, 1, 'only the newly subscribed c');
  });

  it('a stale nonce is ignored, subscription changes included', () => {
    const h = new Harness();
    h.source.set(ENDPOINT_TYPE, 'a', 'A1');
    h.source.set(ENDPOINT_TYPE, 'b', 'B1');
    h.request({ typeUrl: ENDPOINT_TYPE, resourceNames: ['a'] });
    const stale = h.request({ typeUrl: ENDPOINT_TYPE, responseNonce: '999', resourceNames: ['a', 'b'] });
    assert.equal(stale.outcome.kind, 'stale');
    assert.deepEqual(stale.responses, []);
    assert.deepEqual(h.stream.status().types[0]?.subscribed, ['a']);
  });

  it('a NACK is recorded, not answered, and the next change is sent', () => {
    const h = new Harness();
    h.source.set(ENDPOINT_TYPE, 'a', 'A1');
    const r1 = h.request({ typeUrl: ENDPOINT_TYPE, resourceNames: ['a'] }).responses[0]!;
    h.request({ typeUrl: ENDPOINT_TYPE, versionInfo: r1.version, responseNonce: r1.nonce, resourceNames: ['a'] });
    h.source.set(ENDPOINT_TYPE, 'a', 'BAD');
    const [bad] = h.refresh();
    const nack = h.request({
      typeUrl: ENDPOINT_TYPE,
      versionInfo: r1.version,
      responseNonce: bad!.nonce,
      resourceNames: ['a'],
      errorDetail: { code: 3, message: 'bad' },
    });
    assert.equal(nack.outcome.kind, 'nack');
    assert.deepEqual(nack.responses, []);
    assert.deepEqual(h.refresh(), [], 'not re-sent');
    const t = h.stream.status().types[0]!;
    assert.equal(t.lastNack?.version, bad!.version);
    assert.equal(t.versionAcked, r1.version);
    h.source.set(ENDPOINT_TYPE, 'a', 'A3');
    assert.equal(h.refresh().length, 1);
  });

  it('a removed wildcard resource disappears from the next full-state response', () => {
    const h = new Harness();
    h.source.set(CLUSTER_TYPE, 'a', 'A1');
    h.source.set(CLUSTER_TYPE, 'b', 'B1');
    h.request({ typeUrl: CLUSTER_TYPE, resourceNames: [] });
    h.source.set(CLUSTER_TYPE, 'b', undefined);
    assert.equal(h.refresh()[0]?.names.length, 1);
  });

  it('an ACK that keeps the subscription resolves nothing; a change still reaches the stream by refresh', () => {
    const h = new Harness();
    h.source.set(ENDPOINT_TYPE, 'a', 'A1');
    const first = h.request({ typeUrl: ENDPOINT_TYPE, resourceNames: ['a'] }).responses[0]!;
    const resolvesBefore = h.source.resolves;
    // The content changes before the ACK arrives: the ACK does not answer it, the push does.
    h.source.set(ENDPOINT_TYPE, 'a', 'A2');
    const ack = h.request({
      typeUrl: ENDPOINT_TYPE,
      resourceNames: ['a'],
      versionInfo: first.version,
      responseNonce: first.nonce,
    });
    assert.equal(ack.outcome.kind, 'ack');
    assert.deepEqual(ack.responses, []);
    assert.equal(h.source.resolves - resolvesBefore, 0, 'an ACK costs no resolve');
    const pushed = h.refresh();
    assert.equal(pushed.length, 1);
    assert.notEqual(pushed[0]!.version, first.version);
    // An ACK that also subscribes to more is answered.
    h.source.set(ENDPOINT_TYPE, 'b', 'B1');
    const more = h.request({
      typeUrl: ENDPOINT_TYPE,
      resourceNames: ['a', 'b'],
      versionInfo: pushed[0]!.version,
      responseNonce: pushed[0]!.nonce,
    });
    assert.equal(more.responses.length, 1);
  });

  it('streams refreshed with one shared map share identical response bytes', () => {
    const a = new Harness();
    const b = new Harness();
    for (const h of [a, b]) {
      h.source.set(ENDPOINT_TYPE, 'x', 'X1');
      h.request({ typeUrl: ENDPOINT_TYPE, resourceNames: ['x'] });
      h.source.set(ENDPOINT_TYPE, 'x', 'X2');
    }
    const shared = new Map<string, Buffer>();
    const ra = refreshNow(a.stream, shared)[0]!;
    const rb = refreshNow(b.stream, shared)[0]!;
    assert.equal(ra.bytes, rb.bytes, 'one buffer for both');
    assert.equal(shared.size, 1);
    // Without the map each stream encodes its own, with the same content.
    a.source.set(ENDPOINT_TYPE, 'x', 'X3');
    b.source.set(ENDPOINT_TYPE, 'x', 'X3');
    const ca = refreshNow(a.stream)[0]!;
    const cb = refreshNow(b.stream)[0]!;
    assert.notEqual(ca.bytes, cb.bytes);
    assert.deepEqual(ca.bytes, cb.bytes);
  });

  it('reads the client placement from the first request that carries a node', () => {
    const h = new Harness();
    h.request({ typeUrl: CLUSTER_TYPE, node: nodeAt('r7', { network: 'n2', labels: { app: 'x' } }) });
    assert.equal(h.stream.placement.locality.region, 'r7');
    assert.equal(h.stream.placement.network, 'n2');
    assert.deepEqual(h.stream.placement.labels, { app: 'x' });
    assert.equal(
      h.stream.concerns(new Map([[CLUSTER_TYPE, new Set(['anything'])]])),
      true,
      'wildcard concerns every name',
    );
  });
});

function nodeAt(region: string, metadata: Record<string, unknown> = {}): NonNullable<DiscoveryRequest['node']> {
  return { id: 'n', cluster: 'c', locality: { region, zone: 'z', subzone: 's' }, metadata, userAgentName: 'test' };
}
