/**
 * Flatten once, share everywhere: streams in the same state are handed the
 * same Buffer, on the initial path and on pushes; streams in another state
 * get their own bytes.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ENDPOINT_TYPE } from '../src/resources/type-urls.js';
import { PushPipeline } from '../src/sessions/push-pipeline.js';
import { PushResponses, sharedEncodeCount } from '../src/sessions/shared-responses.js';
import { SCOPE_MAX_CHARS, SCOPE_MAX_NAMES, scopeOf } from '../src/sessions/session.js';
import type { DiscoveryRequest } from '../src/wire/request.js';
import { collector, interleaved, oneEdsRegistry } from './support/region-streams.js';

/** A CLA per region: the body names the region and a revision bumped by `change`. */
function pipeline() {
  let revision = 1;
  const registry = oneEdsRegistry((region) => new TextEncoder().encode(`${region}@${revision}`));
  const ads = new PushPipeline({ resources: registry, debounceMs: 0 });
  const open = (region: string) => {
    const written: Buffer[] = [];
    const handle = ads.open('test', {
      write: (b, flushed) => {
        written.push(b);
        flushed();
      },
      end: () => {},
      reject: () => {},
    });
    const req: DiscoveryRequest = {
      versionInfo: '',
      node: { id: region, cluster: '', locality: { region, zone: '', subzone: '' }, metadata: {}, userAgentName: '' },
      resourceNames: ['svc'],
      typeUrl: ENDPOINT_TYPE,
      responseNonce: '',
    };
    handle.receive(req);
    return written;
  };
  return {
    open,
    change: () => {
      revision++;
      ads.notify(['svc']);
      ads.flush();
    },
  };
}

describe('shared responses', () => {
  it('hands streams in the same state one Buffer on the initial path and on a push', () => {
    const p = pipeline();
    const a = p.open('r1');
    const b = p.open('r1');
    const c = p.open('r2');
    assert.equal(a.length, 1);
    assert.equal(a[0], b[0], 'the same Buffer object for two r1 streams');
    assert.notEqual(a[0], c[0]);
    assert.notDeepEqual(a[0], c[0], 'r2 gets its own bytes');
    p.change();
    assert.equal(a.length, 2);
    assert.equal(a[1], b[1]);
    assert.notEqual(a[1], a[0]);
    assert.ok(a[1]?.includes(Buffer.from('r1@2')));
  });

  it("holds a push's responses past the grace period, as answers are, until a change touches them", async () => {
    const cache = new PushResponses(1024, 1);
    cache.set('eds-a', Buffer.alloc(100), { typeUrl: 'E', names: ['a'] });
    cache.set('cds', Buffer.alloc(200), { typeUrl: 'C' });
    cache.answers.set('eds-b', Buffer.alloc(50), { typeUrl: 'E', names: ['b'] });
    assert.equal(cache.get('eds-a')?.length, 100);
    assert.equal(cache.get('other'), undefined);
    cache.idle();
    await new Promise((r) => setTimeout(r, 20));
    assert.equal(cache.pinnedSize, 350, 'past the grace period all stay held, each once');
    cache.newPush(new Map([['E', new Set(['a'])]]));
    assert.equal(cache.pinnedSize, 250, 'a change of a lets go of what carries a only');
    assert.equal(cache.answers.get('eds-b')?.length, 50);
    cache.newPush(new Map([['C', new Set(['z'])]]));
    assert.equal(cache.pinnedSize, 50, "any change of a type lets go of what carries all of the type's names");
    cache.newPush();
    assert.equal(cache.pinnedSize, 0, 'a change of no known names lets everything go');
  });

  it('holds past the answers budget for the push only, then weakly once idle past the grace period', async () => {
    const cache = new PushResponses(1024, 20, 100);
    cache.set('k', Buffer.alloc(200));
    assert.equal(cache.pinnedSize, 200);
    assert.equal(cache.answerPinnedSize, 0, 'over the answers budget');
    cache.idle();
    cache.get('k'); // busy again before the grace ends: the pins stay
    await new Promise((r) => setTimeout(r, 40));
    assert.equal(cache.pinnedSize, 200);
    cache.idle();
    await new Promise((r) => setTimeout(r, 40));
    assert.equal(cache.pinnedSize, 0);
    cache.set('k2', Buffer.alloc(600));
    cache.set('k3', Buffer.alloc(600));
    assert.equal(cache.pinnedSize, 600, 'past the byte budget a response is held weakly only');
    cache.newPush();
    assert.equal(cache.pinnedSize, 0, 'a newer push lets the older responses go');
  });
});

describe('a fleet reconnecting to a quiet mesh', () => {
  it('is answered with no new encoding once the first streams have gone and the grace period has passed', async () => {
    const REGIONS = 5;
    const gc = collector();
    const encoded = sharedEncodeCount();
    const first = interleaved(40, REGIONS, { pushWindow: 2, gc, sharedGraceMs: 0 });
    await first.until(1);
    assert.equal(sharedEncodeCount() - encoded, REGIONS, 'the first wave: one encode per region');
    // Every write has gone out and the grace period (0 ms) has passed; full collections, a turn apart (a
    // WeakRef read in a turn keeps its target through that turn), take what is held weakly only.
    for (let k = 0; k < 3; k++) {
      gc();
      await new Promise((r) => setImmediate(r));
    }
    first.reconnect();
    await first.until(1);
    assert.equal(sharedEncodeCount() - encoded, REGIONS, 'the second wave: no new encode');
    first.change();
    await first.until(2);
    assert.equal(sharedEncodeCount() - encoded, 2 * REGIONS, 'a change: one encode per distinct response again');
    first.ads.close();
  });

  it("reuses the push's responses for streams connecting after it, whatever the streams' history", async () => {
    const REGIONS = 5;
    const gc = collector();
    const p = interleaved(40, REGIONS, { pushWindow: 2, gc, sharedGraceMs: 0 });
    await p.until(1);
    p.change();
    await p.until(2);
    const pushed = sharedEncodeCount();
    for (let k = 0; k < 3; k++) {
      gc();
      await new Promise((r) => setImmediate(r));
    }
    // New streams, at their first response, get the bytes the old ones got at their second: the same nonce.
    p.reconnect();
    await p.until(1);
    assert.equal(sharedEncodeCount() - pushed, 0, 'streams connecting after a push: no new encode');
    p.ads.close();
  });
});

describe('one encode per distinct response per push', () => {
  it('encodes as many responses as are distinct, on the initial path and on a push, though the collector runs between streams', async () => {
    const REGIONS = 5;
    const before = sharedEncodeCount();
    // Streams of one region are REGIONS apart in push order; every write goes out a turn later, after a full
    // collection, and the test keeps no Buffer (only counts), as a transport that has flushed.
    const p = interleaved(40, REGIONS, { pushWindow: 2, gc: collector() });
    await p.until(1);
    // The initial answers went out: streams may share a response only with their own region's.
    assert.equal(sharedEncodeCount() - before, REGIONS, 'initial path: one encode per region');
    const pushed = sharedEncodeCount();
    p.change();
    await p.until(2);
    assert.equal(sharedEncodeCount() - pushed, REGIONS, 'one push: one encode per distinct response');
    p.ads.close();
  });
});

describe('the push window', () => {
  /**
   * Streams of one region each; `flush(i)` tells that stream's last write went out; `ack(i)` answers it.
   * Unless `answered` is false, every stream's first answer has been flushed and ACKed on return.
   */
  function windowed(streams: number, pushWindow: number, pushWindowTimeoutMs = 10_000, answered = true) {
    let revision = 1;
    const registry = oneEdsRegistry(() => new TextEncoder().encode(`rev ${revision}`));
    const ads = new PushPipeline({ resources: registry, debounceMs: 0, pushWindow, pushWindowTimeoutMs });
    const nonces: string[][] = [];
    const flushed: ((() => void) | undefined)[] = [];
    const handles = Array.from({ length: streams }, (_, i) => {
      nonces.push([]);
      const h = ads.open('test', {
        // The nonce is the last field of the response: read it back as the client would.
        write: (b, done) => {
          flushed[i] = done;
          nonces[i]!.push(b.toString('latin1').split('*').pop()!.slice(1));
        },
        end: () => {},
        reject: () => {},
      });
      h.receive({
        versionInfo: '',
        node: {
          id: `n${i}`,
          cluster: '',
          locality: { region: 'r', zone: '', subzone: '' },
          metadata: {},
          userAgentName: '',
        },
        resourceNames: ['svc'],
        typeUrl: ENDPOINT_TYPE,
        responseNonce: '',
      });
      return h;
    });
    const ack = (i: number) =>
      handles[i]!.receive({
        versionInfo: '',
        resourceNames: ['svc'],
        typeUrl: ENDPOINT_TYPE,
        responseNonce: nonces[i]!.at(-1)!,
      });
    // Each write is flushed once, when the test says so (as grpc-js calls back once).
    const flush = (i: number) => {
      const done = flushed[i];
      flushed[i] = undefined;
      done?.();
    };
    // The answers to the streams' own requests go out in window order: each flush lets the next one go.
    for (let i = 0; answered && i < streams; i++) {
      flush(i);
      ack(i);
    }
    const change = () => {
      revision++;
      ads.notify(['svc']);
      ads.flush();
    };
    const received = () => nonces.map((n) => n.length - 1);
    const written = () => nonces.map((n) => n.length);
    return { ads, handles, ack, flush, change, received, written };
  }

  it("makes the answers to streams' own requests wait for the window too, in order", () => {
    const w = windowed(4, 2, 10_000, false);
    assert.deepEqual(w.written(), [1, 1, 0, 0]);
    assert.equal(w.ads.pushesInFlight, 2);
    w.flush(1);
    assert.deepEqual(w.written(), [1, 1, 1, 0]);
    w.flush(0);
    assert.deepEqual(w.written(), [1, 1, 1, 1]);
    w.flush(2);
    w.flush(3);
    assert.equal(w.ads.pushesInFlight, 0);
    // With every answer out, a change pushes within the window as before.
    for (let i = 0; i < 4; i++) w.ack(i);
    w.change();
    assert.deepEqual(w.received(), [1, 1, 0, 0]);
  });

  it('writes at most K pushes, then one more per push that goes out, in order', () => {
    const w = windowed(5, 2);
    w.change();
    assert.deepEqual(w.received(), [1, 1, 0, 0, 0]);
    assert.equal(w.ads.pushesInFlight, 2);
    w.ack(1); // an ACK alone does not free the slot: the write may still be going out
    assert.deepEqual(w.received(), [1, 1, 0, 0, 0]);
    w.flush(1);
    assert.deepEqual(w.received(), [1, 1, 1, 0, 0]);
    w.flush(0);
    w.flush(2);
    assert.deepEqual(w.received(), [1, 1, 1, 1, 1]);
    w.flush(3);
    w.flush(4);
    assert.equal(w.ads.pushesInFlight, 0);
  });

  it('pushes a stream changed again while its slot is held once the slot frees, behind those waiting', () => {
    const w = windowed(3, 1);
    w.change();
    assert.deepEqual(w.received(), [1, 0, 0]);
    w.change(); // stream 0 still holds the slot: its second push waits
    w.flush(0);
    assert.deepEqual(w.received(), [1, 1, 0]);
    w.flush(1);
    w.flush(2);
    assert.deepEqual(w.received(), [2, 1, 1]);
  });

  it('frees the slot of a stream that closes, and of one whose write never completes', async () => {
    const w = windowed(3, 1, 30);
    w.change();
    assert.deepEqual(w.received(), [1, 0, 0]);
    w.handles[0]!.closed();
    assert.deepEqual(w.received(), [1, 1, 0]);
    await new Promise((r) => setTimeout(r, 80));
    assert.deepEqual(w.received(), [1, 1, 1]);
  });

  it('sends everyone at once with the window off', () => {
    const w = windowed(4, 0);
    w.change();
    assert.deepEqual(w.received(), [1, 1, 1, 1]);
  });
});

describe('the scope a held response keeps', () => {
  it('lists few short names, and covers the whole type past either bound (a closed stream keeps none alive)', () => {
    assert.deepEqual(scopeOf(ENDPOINT_TYPE, new Set(['a', 'b'])), { typeUrl: ENDPOINT_TYPE, names: ['a', 'b'] });
    assert.deepEqual(scopeOf(ENDPOINT_TYPE, undefined), { typeUrl: ENDPOINT_TYPE });
    const many = new Set(Array.from({ length: SCOPE_MAX_NAMES + 1 }, (_, i) => `n${i}`));
    assert.deepEqual(scopeOf(ENDPOINT_TYPE, many), { typeUrl: ENDPOINT_TYPE });
    const long = new Set(['x'.repeat(SCOPE_MAX_CHARS + 1)]);
    assert.deepEqual(scopeOf(ENDPOINT_TYPE, long), { typeUrl: ENDPOINT_TYPE });
    // A type-wide scope is let go by any change to the type.
    const held = new PushResponses();
    held.answers.set('k', Buffer.alloc(10), scopeOf(ENDPOINT_TYPE, long));
    held.newPush(new Map([[ENDPOINT_TYPE, new Set(['unrelated'])]]));
    assert.equal(held.answerPinnedSize, 0);
  });
});
