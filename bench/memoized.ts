/**
 * CLA work against baselines that do the same work with the same memory
 * (section 1b). Each side starts from the endpoint list and ends with the
 * bytes every stream is sent; each memoizes by client locality, as Istio's
 * EDS cache does:
 *
 * - Canopy: build the locality tree, look each client up in a fresh CLA
 *   cache, and lay out each distinct CLA once as contiguous bytes that all of
 *   its streams share.
 * - memoized rank loop: ztunnel's loop (best-matching tier only), run once
 *   per distinct client locality.
 * - memoized same-output builder: group the endpoints by locality (sorted as
 *   the tree orders them), then for each distinct client locality give every
 *   group its failover priority and encode the full CLA with Canopy's own
 *   contiguous encoder (`encodeCla`). It emits exactly Canopy's bytes; `sameBytes` checks that on every run.
 *
 * Every figure is CPU ms, the median of five runs with the spread.
 */
import { ClaCache } from '../server/src/domain/cla-cache.js';
import type { Cla, ClaGroup } from '../server/src/domain/cla.js';
import { localityKey, type Locality, type Placement } from '../server/src/domain/locality.js';
import { Mesh, type ServiceState } from '../server/src/domain/mesh.js';
import { endpointKey, type Endpoint, type ServiceSpec } from '../server/src/domain/service.js';
import { encodeCla, encodeClaBytes } from '../server/src/resources/endpoint-codec.js';
import { flatten, type Bytes } from '../server/src/wire/rope.js';
import { rankLoop } from './baselines.js';
import { cpu, failoverService, makeClients, makeEndpoints, quiesce } from './data.js';
import { MIN_RUNS, ratio, spread, type Spread } from './stats.js';

export interface MemoizedShape {
  readonly endpoints: number;
  readonly clients: number;
  readonly localities: number;
}

export interface MemoizedFigures extends MemoizedShape {
  readonly distinctClas: number;
  readonly canopyMs: Spread;
  readonly rankLoopMemoMs: Spread;
  readonly sameOutputMemoMs: Spread;
  readonly timesCheaperThanSameOutput: number;
  readonly timesCheaperThanRankLoop: number;
  /** Whether the same-output builder's bytes equal Canopy's for every distinct client locality. */
  readonly sameBytes: boolean;
}

/** Canopy's whole path from endpoints to per-stream bytes; returns each client's bytes. */
function canopy(spec: ServiceSpec, clients: readonly Placement[]): Uint8Array[] {
  return canopyRun(spec, clients).bytes;
}

function canopyRun(spec: ServiceSpec, clients: readonly Placement[]): { bytes: Uint8Array[]; live: unknown } {
  const mesh = new Mesh();
  mesh.put(spec);
  const state = mesh.get(spec.name) as ServiceState;
  const cache = new ClaCache<Bytes>(encodeClaBytes, { liveSpans: true });
  const flat = new Map<Bytes, Uint8Array>();
  const bytes = clients.map((c) => {
    const b = cache.lookup(state, c).bytes;
    let out = flat.get(b);
    if (!out) flat.set(b, (out = flatten(b)));
    return out;
  });
  return { bytes, live: [mesh, cache] };
}

function memoByLocality(clients: readonly Placement[], build: (l: Locality) => Uint8Array): Uint8Array[] {
  const memo = new Map<string, Uint8Array>();
  return clients.map((c) => {
    const k = localityKey(c.locality);
    let out = memo.get(k);
    if (!out) memo.set(k, (out = build(c.locality)));
    return out;
  });
}

interface Group {
  readonly locality: Locality;
  readonly weight: number;
  readonly endpoints: readonly Endpoint[];
}

/** Endpoints grouped by locality, groups and endpoints in the tree's order (by value, then by address:port). */
function sortedGroups(endpoints: readonly Endpoint[]): Group[] {
  const m = new Map<string, { locality: Locality; weight: number; endpoints: Endpoint[] }>();
  for (const ep of endpoints) {
    if (ep.health !== 'healthy') continue;
    const k = localityKey(ep.locality);
    let g = m.get(k);
    if (!g) m.set(k, (g = { locality: ep.locality, weight: 0, endpoints: [] }));
    g.weight += ep.weight;
    g.endpoints.push(ep);
  }
  const byString = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);
  const groups = [...m.values()];
  for (const g of groups) {
    const keyed = g.endpoints.map((e) => [endpointKey(e), e] as const).sort((a, b) => byString(a[0], b[0]));
    g.endpoints = keyed.map((k) => k[1]);
  }
  return groups.sort(
    (a, b) =>
      byString(a.locality.region, b.locality.region) ||
      byString(a.locality.zone, b.locality.zone) ||
      byString(a.locality.subzone, b.locality.subzone),
  );
}

/** Failover over region → zone → subzone: the client's deepest matching subtree first, then each wider one. */
function sameOutputCla(groups: readonly Group[], c: Locality, overprovisioningFactor: number): Cla {
  const depth = (l: Locality): number =>
    l.region !== c.region ? 0 : l.zone !== c.zone ? 1 : l.subzone !== c.subzone ? 2 : 3;
  const deepest = Math.max(0, ...groups.map((g) => depth(g.locality)));
  const out: ClaGroup[] = [];
  // Priority 0 is the deepest match; a level no group reaches makes no tier.
  for (let d = deepest, priority = 0; d >= 0; d--) {
    const tier = groups.filter((g) => depth(g.locality) === d);
    if (tier.length === 0) continue;
    for (const g of tier) out.push({ locality: g.locality, priority, weight: g.weight, endpoints: g.endpoints });
    priority++;
  }
  return { clusterName: 'svc', groups: out, overprovisioningFactor };
}

function sameOutput(spec: ServiceSpec, clients: readonly Placement[]): Uint8Array[] {
  const groups = sortedGroups(spec.endpoints);
  return memoByLocality(clients, (l) => encodeCla(sameOutputCla(groups, l, spec.loadBalancing.overprovisioningFactor)));
}

function rankLoopMemo(spec: ServiceSpec, clients: readonly Placement[]): Uint8Array[] {
  const scopes = spec.loadBalancing.routingPreference;
  return memoByLocality(clients, (l) =>
    rankLoop(
      scopes,
      spec.endpoints,
      clients.find((c) => c.locality === l)!,
      encodeCla,
    ),
  );
}

function equalBytes(a: readonly Uint8Array[], b: readonly Uint8Array[]): boolean {
  return a.length === b.length && a.every((x, i) => Buffer.compare(x, b[i] as Uint8Array) === 0);
}

export async function memoizedComparison(shape: MemoizedShape, runs = MIN_RUNS): Promise<MemoizedFigures> {
  const spec = failoverService('svc', makeEndpoints(shape.endpoints));
  const clients = makeClients(shape.clients, shape.localities);
  // Warm-up, so no side pays for JIT compilation in its figure. One small
  // service stays alive through the runs, as other services do in a running
  // server: without a live instance, the full GC before each run lets V8 drop
  // the tree's and ropes' hidden classes and deoptimize the code compiled for
  // them, which a server never pays. The baseline's plain objects and arrays
  // have nothing to lose that way.
  const resident = canopyRun(failoverService('resident', makeEndpoints(100)), clients.slice(0, 10)).live;
  for (let i = 0; i < 3; i++) {
    canopy(spec, clients);
    sameOutput(spec, clients.slice(0, 50));
    rankLoopMemo(spec, clients.slice(0, 20));
  }
  const samples = { canopy: [] as number[], rank: [] as number[], same: [] as number[] };
  let sameBytes = true;
  let distinct = 0;
  // Interleaved, so a burst of load from elsewhere on the machine lands on every side alike.
  for (let i = 0; i < runs; i++) {
    await quiesce();
    const c = cpu(() => canopy(spec, clients));
    samples.canopy.push(c.ms);
    await quiesce();
    const s = cpu(() => sameOutput(spec, clients));
    samples.same.push(s.ms);
    await quiesce();
    samples.rank.push(cpu(() => rankLoopMemo(spec, clients)).ms);
    sameBytes &&= equalBytes(c.value, s.value);
    distinct = new Set(c.value).size;
  }
  // Referenced after the runs, so the resident service is not collected before they end.
  if (resident === undefined) throw new Error('unreachable');
  const canopyMs = spread(samples.canopy);
  const sameOutputMemoMs = spread(samples.same);
  const rankLoopMemoMs = spread(samples.rank);
  return {
    ...shape,
    distinctClas: distinct,
    canopyMs,
    rankLoopMemoMs,
    sameOutputMemoMs,
    timesCheaperThanSameOutput: ratio(sameOutputMemoMs, canopyMs),
    timesCheaperThanRankLoop: ratio(rankLoopMemoMs, canopyMs),
    sameBytes,
  };
}
