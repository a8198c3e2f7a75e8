/**
 * `node dist/bench/policy.js`: the locality policy's cost beside the plain tree, on the same
 * 10k endpoints × 1k clients (100 localities, 3 label values): the first pass (every distinct
 * key built), a warm pass (every lookup a hit), and the distinct CLAs held. 7 runs, median and
 * range. Standalone (not part of `npm run bench`).
 */
import { ClaCache } from '../server/src/domain/cla-cache.js';
import { Mesh } from '../server/src/domain/mesh.js';
import type { LocalityPolicy } from '../server/src/domain/policy.js';
import type { Placement } from '../server/src/domain/locality.js';
import { makeClients, makeEndpoints } from './data.js';

const TEAMS = ['a', 'b', 'c'];
const endpoints = makeEndpoints(10_000).map((e, i) => ({ ...e, labels: { team: TEAMS[i % 3]! } }));
const clients: Placement[] = makeClients(1000, 100).map((c, i) => ({ ...c, labels: { team: TEAMS[i % 3]! } }));
const policies: Record<string, LocalityPolicy | undefined> = {
  'tree only': undefined,
  'failoverPriority [label:team] + failover': {
    failoverPriority: [{ scope: 'label:team' }],
    failover: { rules: [{ from: ['r0'], to: { type: 'only', values: ['r1'] } }], unmatched: 'last' },
  },
  distribute: {
    distribute: [
      {
        from: '*',
        to: [
          { pattern: 'r0', weight: 60 },
          { pattern: '*', weight: 40 },
        ],
      },
    ],
  },
};

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

for (const [name, policy] of Object.entries(policies)) {
  const cold: number[] = [];
  const warm: number[] = [];
  let entries = 0;
  for (let run = 0; run < 7; run++) {
    const mesh = new Mesh();
    mesh.put({
      name: 's',
      loadBalancing: {
        mode: 'failover',
        routingPreference: ['region', 'zone', 'subzone'],
        crossNetworkFailover: true,
        overprovisioningFactor: 140,
        ...(policy ? { policy } : {}),
      },
      endpoints,
    });
    const s = mesh.get('s')!;
    const cache = new ClaCache((cla) => ({ length: cla.groups.length }));
    let t = process.hrtime.bigint();
    for (const c of clients) cache.lookup(s, c);
    cold.push(Number(process.hrtime.bigint() - t) / 1e6);
    t = process.hrtime.bigint();
    for (const c of clients) cache.lookup(s, c);
    warm.push(Number(process.hrtime.bigint() - t) / 1e3 / clients.length);
    entries = cache.entriesFor('s');
  }
  const fmt = (xs: number[], unit: string) =>
    `${median(xs).toPrecision(2)} ${unit} (${Math.min(...xs).toPrecision(2)}–${Math.max(...xs).toPrecision(2)})`;
  console.log(
    `${name}: first pass ${fmt(cold, 'ms')}, hit ${fmt(warm, 'µs')}/lookup, ${entries} distinct CLAs for ${clients.length} clients`,
  );
}
