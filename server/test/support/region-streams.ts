/**
 * Streams on a real PushPipeline, each in one of a few regions, whose one
 * resource is a 256 KB response per region (as a 10k-endpoint CLA is): for
 * tests of how pushes share and order responses. Writes complete a turn
 * later, optionally after a full collection.
 */
import v8 from 'node:v8';
import vm from 'node:vm';
import type { Placement } from '../../src/domain/locality.js';
import { ResourceRegistry } from '../../src/resources/registry.js';
import { makeResource } from '../../src/resources/resource.js';
import { ENDPOINT_TYPE } from '../../src/resources/type-urls.js';
import { PushPipeline } from '../../src/sessions/push-pipeline.js';
import assert from 'node:assert/strict';

export const CLA_BYTES = 256 * 1024;

/**
 * A registry of one EDS resource, `svc`, whose bytes depend on the client's region only; `shareGroup`: the
 * type says so (as the real EDS type names the tree node a client gets its CLA from).
 */
export function oneEdsRegistry(body: (region: string) => Uint8Array, shareGroup = false): ResourceRegistry {
  return new ResourceRegistry([
    {
      typeUrl: ENDPOINT_TYPE,
      shortName: 'EDS',
      fullStateInSotw: false,
      pushRank: 1,
      names: () => ['svc'],
      ...(shareGroup ? { shares: { shareGroup: (_name: string, client: Placement) => client.locality.region } } : {}),
      resolve: (name: string, client: Placement) => makeResource(name, ENDPOINT_TYPE, body(client.locality.region)),
      touchedBy: (services) => services,
      forget: () => {},
    },
  ]);
}

/** The collector, run between writes as it runs under load. */
export function collector(): () => void {
  v8.setFlagsFromString('--expose-gc');
  return vm.runInNewContext('gc') as () => void;
}

/**
 * `streams` streams over `regions` regions, interleaved (stream i in region i % regions, and with `zones`, in
 * zone ⌊i / regions⌋ % zones: the bytes still depend on the region only); each flush is a turn later.
 */
export function interleaved(
  streams: number,
  regions: number,
  opts: {
    pushWindow: number;
    zones?: number;
    /** The registry's type names the region as the share group of every client in it. */
    shareGroup?: boolean;
    sharedBytes?: number;
    sharedAnswerBytes?: number;
    sharedGraceMs?: number;
    gc?: () => void;
    collect?: () => void;
    collectAfterBytes?: number;
    collectIdleMs?: number;
  },
) {
  let revision = 1;
  const registry = oneEdsRegistry((region) => {
    const b = Buffer.alloc(CLA_BYTES, region);
    b.write(`@${revision}`);
    return b;
  }, opts.shareGroup);
  const ads = new PushPipeline({ resources: registry, debounceMs: 0, ...opts });
  /** The region of each write, in the order the pipeline wrote them. */
  const order: string[] = [];
  let writes = new Array<number>(streams).fill(0);
  const open = () => {
    const counts = (writes = new Array<number>(streams).fill(0));
    return Array.from({ length: streams }, (_, i) => {
      const region = `r${i % regions}`;
      const handle = ads.open('test', {
        write: (_b, flushed) => {
          counts[i]!++;
          order.push(region);
          setImmediate(() => {
            opts.gc?.();
            flushed();
          });
        },
        end: () => {},
        reject: () => {},
      });
      handle.receive({
        versionInfo: '',
        node: {
          id: `n${i}`,
          cluster: '',
          locality: { region, zone: opts.zones ? `z${Math.floor(i / regions) % opts.zones}` : '', subzone: '' },
          metadata: {},
          userAgentName: '',
        },
        resourceNames: ['svc'],
        typeUrl: ENDPOINT_TYPE,
        responseNonce: '',
      });
      return handle;
    });
  };
  let handles = open();
  /** Every stream goes and connects again (its client reconnects): `until` counts the new streams' writes. */
  const reconnect = () => {
    for (const h of handles) h.closed();
    handles = open();
  };
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
  return { ads, order, until, change, reconnect };
}
