/**
 * The push goes out by response: streams that get the same bytes are let
 * through the window back to back, so the shared-responses cache needs to
 * hold only the response of the group going out, not every distinct one for
 * the whole push, and still encodes each distinct response once.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import v8 from 'node:v8';
import vm from 'node:vm';
import type { Placement } from '../src/domain/locality.js';
import { ResourceRegistry } from '../src/resources/registry.js';
import { makeResource } from '../src/resources/resource.js';
import { ENDPOINT_TYPE } from '../src/resources/type-urls.js';
import { PushPipeline } from '../src/sessions/push-pipeline.js';
import { sharedEncodeCount } from '../src/sessions/shared-responses.js';

const CLA_BYTES = 256 * 1024;

function collector(): () => void {
  v8.setFlagsFromString('--expose-gc');
  return vm.runInNewContext('gc') as () => void;
}

/** `streams` streams over `regions` regions, interleaved (stream i in region i % regions); each flush is a turn later. */
function interleaved(
  streams: number,
  regions: number,
  opts: {
    pushWindow: number;
    sharedBytes: number;
    gc?: () => void;
    collect?: () => void;
    collectAfterBytes?: number;
    collectIdleMs?: number;
  },
) {
  let revision = 1;
  const registry = new ResourceRegistry([
    {
      typeUrl: ENDPOINT_TYPE,
      shortName: 'EDS',
      fullStateInSotw: false,
      pushRank: 1,
      names: () => ['svc'],
      resolve: (name: string, client: Placement) => {
        const b = Buffer.alloc(CLA_BYTES, client.locality.region);
        b.write(`@${revision}`);
        return makeResource(name, ENDPOINT_TYPE, b);
      },
      touchedBy: (services) => services,
      forget: () => {},
    },
  ]);
  const ads = new PushPipeline({ resources: registry, debounceMs: 0, ...opts });
  /** The region of each write, in the order the pipeline wrote them. */
  const order: string[] = [];
  const writes = new Array<number>(streams).fill(0);
  for (let i = 0; i < streams; i++) {
    const region = `r${i % regions}`;
    ads
      .open('test', {
        write: (_b, flushed) => {
          writes[i]!++;
          order.push(region);
          setImmediate(() => {
            opts.gc?.();
            flushed();
          });
        },
        end: () => {},
        reject: () => {},
      })
      .receive({
        versionInfo: '',
        node: {
          id: `n${i}`,
          cluster: '',
          locality: { region, zone: '', subzone: '' },
          metadata: {},
          userAgentName: '',
        },
        resourceNames: ['svc'],
        typeUrl: ENDPOINT_TYPE,
        responseNonce: '',
      });
  }
  const until = async (n: number) => {
    for (let t = 0; t < 2000 && !writes.every((w) => w >= n); t++) await new Promise((r) => setTimeout(r, 5));
    assert.ok(
      writes.every((w) => w >= n),
      `every stream had ${n} responses (${writes.join(',')})`,
    );
    await new Promise((r) => setTimeout(r, 20));
  };
  const change = () => {
    revision++;
    ads.notify(['svc']);
    ads.flush();
  };
  return { ads, order, until, change };
}

/** How many runs of equal regions `order` has (a region written in one run per push: its streams back to back). */
function runs(order: readonly string[]): number {
  return order.filter((r, i) => i === 0 || order[i - 1] !== r).length;
}

describe('the push by response', () => {
  it('lets the streams of one response through the window back to back, on the initial path and on a push', async () => {
    const REGIONS = 4;
    const p = interleaved(24, REGIONS, { pushWindow: 2, sharedBytes: CLA_BYTES * 2 });
    await p.until(1);
    // The first two took the free slots; every stream waiting after them went out with its region's.
    assert.ok(runs(p.order) <= REGIONS + 2, `initial writes by region: ${p.order.join(' ')}`);
    const initial = p.order.length;
    p.change();
    await p.until(2);
    const pushed = p.order.slice(initial);
    assert.equal(runs(pushed), REGIONS, `push writes by region: ${pushed.join(' ')}`);
    p.ads.close();
  });

  it('encodes each distinct response once per push while holding one at a time, the collector running between writes', async () => {
    const REGIONS = 5;
    const before = sharedEncodeCount();
    // Room for one 256 KB response only: without the order, every stream but the first of a run would encode again.
    const p = interleaved(40, REGIONS, { pushWindow: 2, sharedBytes: CLA_BYTES + 1024, gc: collector() });
    await p.until(1);
    const initial = sharedEncodeCount() - before;
    assert.ok(initial <= REGIONS + 2, `initial path: ${initial} encodes for ${REGIONS} distinct responses`);
    const pushed = sharedEncodeCount();
    p.change();
    await p.until(2);
    assert.equal(sharedEncodeCount() - pushed, REGIONS, 'one push: one encode per distinct response');
    p.ads.close();
  });
});

describe('the collection after a burst', () => {
  it('runs once writing has stopped after a big burst, once per burst', async () => {
    let collections = 0;
    const settle = () => new Promise((r) => setTimeout(r, 60));
    // 8 × 256 KB answers: over the 1 MB threshold.
    const p = interleaved(8, 2, {
      pushWindow: 2,
      sharedBytes: CLA_BYTES * 2,
      collect: () => collections++,
      collectAfterBytes: 1024 * 1024,
      collectIdleMs: 20,
    });
    await p.until(1);
    await settle();
    assert.equal(collections, 1, 'one collection after the initial burst');
    await settle();
    assert.equal(collections, 1, 'and no more while idle');
    p.change();
    await p.until(2);
    await settle();
    assert.equal(collections, 2, 'one after the push');
    p.ads.close();
  });
});
