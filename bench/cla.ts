/**
 * Section 1, CLA generation: Canopy against the ztunnel rank loop and an
 * Istio-style per-client computation, on the same data in the same process.
 * Section 5, wire size: bytes per endpoint in a CLA and in the compiled tree.
 */
import type { ClaEntry } from '../server/src/domain/cla-cache.js';
import { ClaCache } from '../server/src/domain/cla-cache.js';
import { Mesh, type ServiceState } from '../server/src/domain/mesh.js';
import { serverClaCache } from '../server/src/resources/endpoint/endpoint.js';
import { encodeCla } from '../server/src/resources/endpoint/endpoint-codec.js';
import { makeResource, type Resource } from '../server/src/resources/resource.js';
import { flatten, type Bytes } from '../server/src/wire/rope.js';
import { encodeLocalityTree } from '../server/src/resources/tree-codec.js';
import { ENDPOINT_TYPE } from '../server/src/resources/type-urls.js';
import { istioPerClient, localityGroups, rankLoop } from './baselines.js';
import { cpu, failoverService, makeClients, makeEndpoints, median, quiesce, round } from './data.js';
import type { Placement } from '../server/src/domain/locality.js';

export interface Shape {
  readonly endpoints: number;
  readonly clients: number;
  readonly localities: number;
}

/**
 * What the server does for C clients: find each client's entry, and for each
 * distinct entry make the resource it sends (the Any and its version). With
 * `flat`, also lay each distinct CLA out as one contiguous buffer, which the
 * server itself never does (it copies rope parts straight into responses),
 * so that both sides end with the same thing the baselines produce: bytes.
 */
function canopyPass(
  state: ServiceState,
  clients: readonly Placement[],
  flat: boolean,
): { entries: number; bytes: number } {
  const cache = serverClaCache();
  const made = new Map<ClaEntry<Bytes>, Resource>();
  let bytes = 0;
  for (const c of clients) {
    const e = cache.lookup(state, c);
    let r = made.get(e);
    if (!r) {
      r = makeResource(state.name, ENDPOINT_TYPE, e.bytes);
      made.set(e, r);
      void r.hash;
      if (flat) flatten(r.any);
    }
    bytes += r.any.length;
  }
  return { entries: made.size, bytes };
}

export async function claGeneration(shape: Shape, opts: { quick: boolean }) {
  const endpoints = makeEndpoints(shape.endpoints);
  const clients = makeClients(shape.clients, shape.localities);
  const spec = failoverService('svc', endpoints);
  const build = (): ServiceState => {
    const mesh = new Mesh();
    mesh.put(spec);
    return mesh.get('svc') as ServiceState;
  };
  // Warm-up, so no side pays for JIT compilation in its figure: whole Canopy passes until its code is
  // optimized (each on its own tree), 20 clients of each baseline (their loops optimize within one client).
  for (let i = 0; i < 6; i++) canopyPass(build(), clients, i % 2 === 0);
  for (const c of clients.slice(0, 20)) rankLoop(spec.loadBalancing.routingPreference, endpoints, c, encodeCla);
  const warmGroups = localityGroups(endpoints);
  for (const c of clients.slice(0, 20)) istioPerClient(warmGroups, c, encodeCla);
  // The tree is the server's state, as the endpoint list is the baselines': built once per change, timed apart.
  // Every Canopy run gets its own tree, so no run finds another's parts cached; the median of 5 is reported.
  const RUNS = 5;
  const treeBuilds: number[] = [];
  const ropeRuns: { ms: number; value: { entries: number; bytes: number } }[] = [];
  const flatRuns: { ms: number; value: { entries: number; bytes: number } }[] = [];
  const warmRuns: number[] = [];
  for (let i = 0; i < RUNS * 2; i++) {
    const b = cpu(build);
    treeBuilds.push(b.ms);
    await quiesce();
    (i % 2 === 0 ? ropeRuns : flatRuns).push(cpu(() => canopyPass(b.value, clients, i % 2 === 1)));
    if (i % 2 === 0) {
      // Warm: the same tree again with an empty CLA cache. The tree's leaf parts are built (as in a server
      // that has been running), every client's entry and resource are made anew.
      await quiesce();
      warmRuns.push(cpu(() => canopyPass(b.value, clients, false)).ms);
    }
  }
  const canopyMs = median(ropeRuns.map((r) => r.ms));
  const canopyWarmMs = median(warmRuns);
  const canopyFlatMs = median(flatRuns.map((r) => r.ms));
  const treeBuildMs = median(treeBuilds);
  await quiesce();

  let bytesRank = 0;
  const rank = cpu(() => {
    for (const c of clients)
      bytesRank += rankLoop(spec.loadBalancing.routingPreference, endpoints, c, encodeCla).length;
  });
  // The Istio-style baseline is the slowest (about 1 µs per client-endpoint pair): past 2e7 pairs it runs
  // on the first 1,000 clients (2,000 in a full run) and is scaled to all of them (flagged in the output).
  const sample = opts.quick ? 1000 : 2000;
  const istioClients = shape.clients * shape.endpoints > 2e7 ? clients.slice(0, sample) : clients;
  await quiesce();
  const istioSample = cpu(() => {
    const groups = localityGroups(endpoints);
    for (const c of istioClients) istioPerClient(groups, c, encodeCla);
  });
  const istioMs = (istioSample.ms * clients.length) / istioClients.length;
  const pairs = shape.clients * shape.endpoints;
  return {
    ...shape,
    treeBuildMs: round(treeBuildMs),
    canopyMs: round(canopyMs),
    canopyFlatMs: round(canopyFlatMs),
    canopyWarmMs: round(canopyWarmMs),
    rankLoopMs: round(rank.ms),
    istioMs: round(istioMs),
    istioScaledFrom: istioClients.length < clients.length ? istioClients.length : undefined,
    canopyNsPerEndpoint: round((canopyMs * 1e6) / pairs, 3),
    rankLoopNsPerEndpoint: round((rank.ms * 1e6) / pairs, 3),
    istioNsPerEndpoint: round((istioMs * 1e6) / pairs, 3),
    speedupVsRankLoop: round(rank.ms / canopyMs, 1),
    speedupVsRankLoopFlat: round(rank.ms / canopyFlatMs, 1),
    speedupVsRankLoopWarm: round(rank.ms / canopyWarmMs, 1),
    speedupVsRankLoopWithTreeBuild: round(rank.ms / (canopyFlatMs + treeBuildMs), 1),
    speedupVsIstio: round(istioMs / canopyMs, 1),
    cachedClas: ropeRuns[0]!.value.entries,
    bytesPerClient: {
      canopy: Math.round(ropeRuns[0]!.value.bytes / shape.clients),
      rankLoop: Math.round(bytesRank / shape.clients),
    },
  };
}

/** Section 5: a CLA with every endpoint (random mode), and the compiled tree the node agents get. */
export function wireSize(n: number) {
  const endpoints = makeEndpoints(n);
  const mesh = new Mesh();
  mesh.put({
    ...failoverService('svc', endpoints),
    vip: '10.96.0.10',
    port: 8080,
    loadBalancing: { ...failoverService('svc', []).loadBalancing, mode: 'random' },
  });
  const state = mesh.get('svc') as ServiceState;
  const cla = new ClaCache(encodeCla).lookup(state, makeClients(1, 1)[0]!).bytes.length;
  const tree = encodeLocalityTree(state.spec, state.tree.compile()).length;
  return {
    endpoints: n,
    claBytes: cla,
    claBytesPerEndpoint: round(cla / n, 2),
    treeBytes: tree,
    treeBytesPerEndpoint: round(tree / n, 2),
  };
}
