/**
 * Delta streams share encoded responses as SotW streams do: streams in the
 * same state (same resources at the same versions) are handed one Buffer, on
 * the initial path and on a push, so a push encodes each distinct response
 * once. The nonce is made from the content, so streams connecting after a
 * push reuse its bytes; a stream in another state gets its own bytes, with
 * its own nonce.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ENDPOINT_TYPE } from '../src/resources/type-urls.js';
import { PushPipeline } from '../src/sessions/push-pipeline.js';
import { sharedEncodeCount } from '../src/sessions/shared-responses.js';
import type { NodeInfo } from '../src/wire/request.js';
import { decodeDelta, req } from './support/leds-fixtures.js';
import { oneEdsRegistry } from './support/region-streams.js';

const node = (id: string, region: string): NodeInfo => ({
  id,
  cluster: '',
  locality: { region, zone: '', subzone: '' },
  metadata: {},
  userAgentName: '',
});

/** Delta streams on a real pipeline, one EDS name whose bytes depend on the region; writes flush at once. */
function deltaStreams(regions: readonly string[]) {
  let revision = 1;
  const registry = oneEdsRegistry((region) => new TextEncoder().encode(`${region}@${revision}`));
  const ads = new PushPipeline({ resources: registry, debounceMs: 0 });
  const open = (region: string, i: number) => {
    const written: Buffer[] = [];
    const handle = ads.openDelta('test', {
      write: (b, flushed) => {
        written.push(b);
        flushed();
      },
      end: () => {},
      reject: () => {},
    });
    handle.receive(req(ENDPOINT_TYPE, { node: node(`n${i}`, region), subscribe: ['svc'] }));
    const ack = () => handle.receive(req(ENDPOINT_TYPE, { responseNonce: nonceOf(written.at(-1)!) }));
    return { region, written, handle, ack };
  };
  const streams = regions.map(open);
  const change = () => {
    revision++;
    ads.notify(['svc']);
    ads.flush();
  };
  return { ads, streams, change, open };
}

const nonceOf = (b: Buffer): string => String(decodeDelta(b)['nonce']);

describe('delta: shared responses', () => {
  it('hands delta streams in the same state one Buffer, and encodes each distinct response once, initial and push', () => {
    const before = sharedEncodeCount();
    const { ads, streams, change } = deltaStreams(['r1', 'r2', 'r1', 'r2', 'r1', 'r3']);
    assert.equal(sharedEncodeCount() - before, 3, 'initial path: one encode per region');
    const [a, b, c] = streams;
    assert.equal(a!.written[0], c!.written[0], 'the same Buffer object for two r1 streams');
    assert.notEqual(a!.written[0], b!.written[0]);
    for (const s of streams) s.ack();
    const pushed = sharedEncodeCount();
    change();
    assert.equal(sharedEncodeCount() - pushed, 3, 'one push: one encode per distinct response');
    assert.equal(a!.written[1], c!.written[1]);
    for (const s of streams) {
      assert.equal(s.written.length, 2);
      const [r] = decodeDelta(s.written[1]!)['resources'] as { resource: { value: Uint8Array } }[];
      assert.equal(Buffer.from(r!.resource.value).toString(), `${s.region}@2`, 'each stream its own region');
      assert.notEqual(nonceOf(s.written[1]!), nonceOf(s.written[0]!));
    }
    assert.equal(nonceOf(a!.written[1]!), nonceOf(c!.written[1]!), 'one nonce for the same content');
    ads.close();
  });

  it("reuses the push's responses for streams connecting after it: no new encode", () => {
    const regions = ['r1', 'r2', 'r1', 'r2', 'r1', 'r3'];
    const { ads, streams, change, open } = deltaStreams(regions);
    for (const s of streams) s.ack();
    change();
    const pushed = sharedEncodeCount();
    const later = regions.map((r, i) => open(r, regions.length + i));
    assert.equal(sharedEncodeCount() - pushed, 0, 'streams connecting after a push: no new encode');
    for (const [i, s] of later.entries()) {
      assert.equal(s.written.length, 1);
      assert.equal(s.written[0], streams[i]!.written[1], "the push's Buffer, nonce included");
    }
    ads.close();
  });

  it('gives a stream in another state its own bytes, with its own nonce', () => {
    const { ads, streams, change } = deltaStreams(['r1', 'r1']);
    const [a, b] = streams;
    // Stream b subscribes to one more name: its push covers another state, so its bytes and nonce are not a's.
    b!.handle.receive(req(ENDPOINT_TYPE, { subscribe: ['other'] }));
    assert.equal(b!.written.length, 2);
    a!.ack();
    b!.ack();
    change();
    assert.notEqual(nonceOf(a!.written.at(-1)!), nonceOf(b!.written.at(-1)!));
    assert.notEqual(a!.written.at(-1), b!.written.at(-1));
    for (const s of [a, b]) {
      const names = (decodeDelta(s!.written.at(-1)!)['resources'] as { name: string }[]).map((r) => r.name);
      assert.ok(names.includes('svc'), `the push carries svc (${names.join(', ')})`);
    }
    ads.close();
  });
});
