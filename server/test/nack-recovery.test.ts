/**
 * A NACK never strands a client (issue 40 §2), driven on the sessions directly with a client that
 * rejects any response carrying a bad resource whole, as Envoy does: after the NACK the clean resources
 * of that response still reach it (sent again in halves), the bad one is not sent again until it
 * changes, and later changes arrive against what the client really holds. SotW, delta, and delta LEDS.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Placement } from '../src/domain/locality.js';
import { makeResource, type Resource } from '../src/resources/resource.js';
import { ResourceRegistry } from '../src/resources/registry.js';
import type { ResourceType } from '../src/resources/resource-type.js';
import { ENDPOINT_TYPE, LEDS_TYPE } from '../src/resources/type-urls.js';
import { DeltaSession } from '../src/sessions/delta-session.js';
import type { OutgoingResponse, Session } from '../src/sessions/session.js';
import { refreshNow } from '../src/sessions/session.js';
import { SotwSession } from '../src/sessions/sotw-session.js';
import type { DeltaDiscoveryRequest, DiscoveryRequest } from '../src/wire/request.js';
import { envoyType } from './support/envoy-protos.js';
import { decodeDelta, deltaResources, envoyNode, req, setup, type Obj } from './support/leds-fixtures.js';

/** EDS-like (not full state in SotW) resources whose body is text; "BAD…" is what the client refuses. */
function source() {
  const content = new Map<string, string>();
  const type: ResourceType = {
    typeUrl: ENDPOINT_TYPE,
    shortName: 'EDS',
    fullStateInSotw: false,
    pushRank: 1,
    names: () => [...content.keys()],
    resolve: (name: string, _c: Placement): Resource | undefined => {
      const body = content.get(name);
      return body === undefined ? undefined : makeResource(name, ENDPOINT_TYPE, new TextEncoder().encode(body));
    },
    touchedBy: (s) => s,
    forget: () => {},
  };
  return { content, registry: new ResourceRegistry([type]) };
}

const text = (v: unknown) => Buffer.from(v as Uint8Array).toString();

/** Answers every response the way the pipeline does (its answer, then what it made due) until none is left. */
function drain<R>(s: Session<R>, first: OutgoingResponse[], answer: (r: OutgoingResponse) => R): OutgoingResponse[] {
  const all: OutgoingResponse[] = [];
  const queue = [...first];
  for (let i = 0; queue.length > 0 && i < 100; i++) {
    const r = queue.shift()!;
    all.push(r);
    const { outcome, answer: due } = s.receive(answer(r));
    const again = due === undefined ? undefined : s.respond(outcome.typeUrl, due);
    if (again) queue.push(again);
    for (const t of s.takeDue?.() ?? []) {
      const more = s.respond(t, false);
      if (more) queue.push(more);
    }
  }
  assert.equal(queue.length, 0, 'settles');
  return all;
}

/** A delta client holding name → body, rejecting a response with any BAD body whole. */
function deltaClient() {
  const holds = new Map<string, string>();
  const answer = (r: OutgoingResponse): DeltaDiscoveryRequest => {
    const d = decodeDelta(r.bytes);
    const res = (d['resources'] as Obj[]).map((x) => ({
      name: String(x['name']),
      body: text((x['resource'] as Obj)['value']),
    }));
    if (res.some((x) => x.body.startsWith('BAD'))) {
      return req(ENDPOINT_TYPE, { responseNonce: r.nonce, errorDetail: { code: 3, message: 'BAD body' } });
    }
    for (const x of res) holds.set(x.name, x.body);
    for (const n of d['removed_resources'] as string[]) holds.delete(n);
    return req(ENDPOINT_TYPE, { responseNonce: r.nonce });
  };
  return { holds, answer };
}

function sotwClient() {
  const holds = new Map<string, string>();
  const t = envoyType('envoy.service.discovery.v3.DiscoveryResponse');
  let names: string[] = [];
  const answer = (r: OutgoingResponse): DiscoveryRequest => {
    const d = t.toObject(t.decode(r.bytes), { arrays: true }) as { resources: Obj[]; version_info: string };
    const bodies = d.resources.map((x) => text(x['value']));
    const base = { typeUrl: ENDPOINT_TYPE, resourceNames: names, responseNonce: r.nonce };
    if (bodies.some((b) => b.startsWith('BAD'))) {
      return { ...base, versionInfo: '', errorDetail: { code: 3, message: 'BAD body' } };
    }
    r.names.forEach((n, i) => holds.set(n, bodies[i]!));
    return { ...base, versionInfo: d.version_info };
  };
  return { holds, answer, subscribe: (n: string[]) => (names = n) };
}

const current = (content: Map<string, string>) => new Map([...content].filter(([, b]) => !b.startsWith('BAD')));

describe('after a NACK the client gets every clean resource, then complete updates', () => {
  for (const connect of ['before', 'during'] as const) {
    it(`delta, a client connected ${connect} the bad resource`, () => {
      const { content, registry } = source();
      for (const n of ['a', 'b', 'c', 'd', 'e']) content.set(n, `${n}1`);
      const s = new DeltaSession(1, 'test', registry);
      const c = deltaClient();
      const names = [...content.keys()];
      if (connect === 'during') content.set('c', 'BAD1');
      const { outcome, answer } = s.receive(req(ENDPOINT_TYPE, { node: envoyNode(), subscribe: names }));
      drain(s, [s.respond(outcome.typeUrl, answer!)!], c.answer);
      if (connect === 'before') {
        content.set('c', 'BAD1');
        content.set('a', 'a2');
        drain(s, refreshNow(s), c.answer);
      }
      const want = new Map(current(content));
      if (connect === 'before') want.set('c', 'c1');
      assert.deepEqual(new Map([...c.holds].sort()), new Map([...want].sort()));
      const nacked = s
        .status()
        .types[0]!.resources!.filter((r) => r.state === 'NACKED')
        .map((r) => r.name);
      assert.deepEqual(nacked, ['c'], 'only the bad one stays NACKED');
      assert.deepEqual(refreshNow(s), [], 'the refused version is not sent again');
      content.set('c', 'c3');
      content.set('e', 'e3');
      drain(s, refreshNow(s), c.answer);
      assert.deepEqual(c.holds, new Map([...content].sort()), 'converged');
    });

    it(`SotW, a client connected ${connect} the bad resource`, () => {
      const { content, registry } = source();
      for (const n of ['a', 'b', 'c', 'd', 'e']) content.set(n, `${n}1`);
      const s = new SotwSession(1, 'test', registry);
      const c = sotwClient();
      c.subscribe([...content.keys()]);
      if (connect === 'during') content.set('d', 'BAD1');
      const first = { node: envoyNode(), typeUrl: ENDPOINT_TYPE, resourceNames: [...content.keys()] };
      const { outcome, answer } = s.receive({ ...first, versionInfo: '', responseNonce: '' });
      drain(s, [s.respond(outcome.typeUrl, answer!)!], c.answer);
      if (connect === 'before') {
        content.set('d', 'BAD1');
        content.set('b', 'b2');
        drain(s, refreshNow(s), c.answer);
      }
      const want = new Map(current(content));
      if (connect === 'before') want.set('d', 'd1');
      assert.deepEqual(new Map([...c.holds].sort()), new Map([...want].sort()));
      assert.deepEqual(refreshNow(s), [], 'the refused version is not sent again');
      content.set('d', 'd3');
      content.set('a', 'a3');
      drain(s, refreshNow(s), c.answer);
      assert.deepEqual(new Map([...c.holds].sort()), new Map([...content].sort()), 'converged');
    });
  }

  it('SotW: a NACK that comes after a newer response went out (stale nonce) still rolls back', () => {
    const { content, registry } = source();
    for (const n of ['a', 'b', 'c']) content.set(n, `${n}1`);
    const s = new SotwSession(1, 'test', registry);
    const c = sotwClient();
    c.subscribe(['a', 'b', 'c']);
    const first = { node: envoyNode(), typeUrl: ENDPOINT_TYPE, resourceNames: ['a', 'b', 'c'] };
    const { outcome, answer } = s.receive({ ...first, versionInfo: '', responseNonce: '' });
    drain(s, [s.respond(outcome.typeUrl, answer!)!], c.answer);
    content.set('a', 'BAD1');
    content.set('b', 'b2');
    const [r2] = refreshNow(s);
    content.set('c', 'c2');
    const [r3] = refreshNow(s);
    assert.deepEqual(r3!.names, ['c'], 'pushed before the NACK of r2 came back');
    const late = s.receive(c.answer(r2!));
    assert.equal(late.outcome.kind, 'nack');
    // The client answers r3 next (a stale ACK now), then what the late NACK made the server send.
    drain(s, [r3!, s.respond(ENDPOINT_TYPE, late.answer!)!], c.answer);
    assert.deepEqual(
      new Map([...c.holds].sort()),
      new Map([
        ['a', 'a1'],
        ['b', 'b2'],
        ['c', 'c2'],
      ]),
    );
  });

  it('delta LEDS: one bad collection member keeps only its own collection from the client', () => {
    const { mesh, registry } = setup();
    const s = new DeltaSession(1, 'test', registry);
    const eds = s.receive(req(ENDPOINT_TYPE, { node: envoyNode(), subscribe: ['echo'] }));
    const cla = deltaResources(s.respond(ENDPOINT_TYPE, eds.answer!)!.bytes)[0]!.msg;
    const globs = (cla['endpoints'] as Obj[]).map((e) =>
      String((e['leds_cluster_locality_config'] as Obj)['leds_collection_name']),
    );
    // Members held by the client: name → weight; a member of weight 99 is what it refuses.
    const holds = new Map<string, number>();
    const answer = (r: OutgoingResponse): DeltaDiscoveryRequest => {
      const got = deltaResources(r.bytes);
      const w = (m: Obj) => Number((m['load_balancing_weight'] as Obj | undefined)?.['value'] ?? 1);
      if (got.some((g) => w(g.msg) === 99)) {
        return req(LEDS_TYPE, { responseNonce: r.nonce, errorDetail: { code: 3, message: 'weight 99' } });
      }
      for (const g of got) holds.set(g.name, w(g.msg));
      for (const n of decodeDelta(r.bytes)['removed_resources'] as string[]) holds.delete(n);
      return req(LEDS_TYPE, { responseNonce: r.nonce });
    };
    const bad = mesh.get('echo')!.endpoints.get('10.0.3.1:8080')!;
    mesh.patch('echo', [{ ...bad, weight: 99 }]);
    registry.touchedBy(new Set(['echo']));
    const sub = s.receive(req(LEDS_TYPE, { subscribe: globs }));
    const sent = drain(s, [s.respond(LEDS_TYPE, sub.answer!)!], answer);
    assert.ok(sent.length > 2, `sent again in halves (${sent.length} responses)`);
    // The collection is the unit: the bad member's locality (two members) is held back, nothing else.
    assert.equal(holds.size, 14, 'every member but the bad collection');
    assert.ok(![...holds.keys()].some((n) => n.includes('10.0.3.')));
    const status = s.status().types.find((t) => t.typeUrl === LEDS_TYPE)!;
    const nacked = status.resources!.filter((r) => r.state === 'NACKED').map((r) => r.name);
    assert.equal(nacked.length, 1, JSON.stringify(nacked));
    const again = refreshNow(s).filter((r) => r.typeUrl === LEDS_TYPE);
    assert.deepEqual(again, [], 'the refused collection is not sent again');
    mesh.patch('echo', [{ ...bad, weight: 3 }]);
    registry.touchedBy(new Set(['echo']));
    drain(
      s,
      refreshNow(s).filter((r) => r.typeUrl === LEDS_TYPE),
      answer,
    );
    assert.equal(holds.size, 16, 'converged');
    assert.ok([...holds].some(([n, w]) => n.includes('10.0.3.1:') && w === 3));
  });
});
