/**
 * Section 2, incremental update. One service of N endpoints (100 per leaf),
 * C clients over L localities, all with their CLAs made. Then one endpoint is
 * added, health-flipped or removed, through the same call the admin PATCH
 * uses, and timed until every CLA entry of the service is ready to send again:
 * its version (content digest) and length computed over the changed tree, so
 * that the response encoder only has to copy parts. Every entry is checked,
 * not only the affected ones, and the count whose version moved is reported.
 *
 * The baseline, in the same run: a full rebuild of the same state (tree,
 * cache, every client's entry and resource), which is what a control plane
 * without incremental CLAs does on every change.
 */
import type { ClaEntry } from '../server/src/domain/cla-cache.js';
import { Mesh, type ServiceState } from '../server/src/domain/mesh.js';
import { endpointKey, type Endpoint } from '../server/src/domain/service.js';
import { serverClaCache } from '../server/src/resources/endpoint/endpoint.js';
import { makeResource, type Resource } from '../server/src/resources/resource.js';
import type { Bytes } from '../server/src/wire/rope.js';
import { ENDPOINT_TYPE } from '../server/src/resources/type-urls.js';
import type { Placement } from '../server/src/domain/locality.js';
import {
  cpu,
  failoverService,
  makeClients,
  makeEndpoint,
  makeEndpoints,
  median,
  percentile,
  round,
  settleHeap,
  wall,
} from './data.js';

interface Prepared {
  readonly mesh: Mesh;
  readonly state: ServiceState;
  readonly cache: ReturnType<typeof serverClaCache>;
  /** Each entry's resource, and its version as last read. */
  readonly held: Map<ClaEntry<Bytes>, { readonly resource: Resource; version: string | number }>;
}

function prepare(endpoints: readonly Endpoint[], clients: readonly Placement[]): Prepared {
  const mesh = new Mesh();
  mesh.put(failoverService('svc', endpoints));
  const state = mesh.get('svc') as ServiceState;
  const cache = serverClaCache();
  const p: Prepared = { mesh, state, cache, held: new Map() };
  for (const c of clients) cache.lookup(state, c);
  ready(p);
  return p;
}

/** Every entry's resource brought up to date: version and length. Returns how many versions moved. */
function ready(p: Prepared): { entries: number; moved: number } {
  const entries = p.cache.entriesOf(p.state);
  let moved = 0;
  for (const e of entries) {
    let h = p.held.get(e);
    if (!h) p.held.set(e, (h = { resource: makeResource('svc', ENDPOINT_TYPE, e.bytes), version: -1 }));
    const v = h.resource.hash;
    void h.resource.any.length;
    if (h.version !== v) {
      moved++;
      h.version = v;
    }
  }
  return { entries: entries.length, moved };
}

export function incrementalUpdate(opts: {
  endpoints: number;
  clients: number;
  localities: number;
  rounds: number;
  rebuilds: number;
}) {
  const leaves = Math.min(1000, Math.floor(opts.endpoints / 100));
  const endpoints = makeEndpoints(opts.endpoints, leaves);
  const clients = makeClients(opts.clients, opts.localities);
  const p = prepare(endpoints, clients);
  const timings = { add: [] as number[], flip: [] as number[], remove: [] as number[] };
  let affected = 0;
  let entries = 0;
  // A warm-up round of each, then the timed rounds.
  settleHeap();
  for (let r = -1; r < opts.rounds; r++) {
    const fresh = makeEndpoint(opts.endpoints + 1 + r, leaves);
    const flip = endpoints[(r + 1) * 97] as Endpoint;
    const add = wall(() => (p.mesh.patch('svc', [fresh]), ready(p)));
    const down = wall(() => (p.mesh.patch('svc', [{ ...flip, health: 'unhealthy' }]), ready(p)));
    p.mesh.patch('svc', [flip]);
    ready(p);
    const remove = wall(() => (p.mesh.patch('svc', [], [endpointKey(fresh)]), ready(p)));
    if (r < 0) continue;
    timings.add.push(add.ms);
    timings.flip.push(down.ms);
    timings.remove.push(remove.ms);
    affected = Math.max(affected, add.value.moved, down.value.moved, remove.value.moved);
    entries = add.value.entries;
  }
  const rebuild = Array.from({ length: opts.rebuilds }, () => cpu(() => prepare(endpoints, clients)).ms);
  const stats = (xs: number[]) => ({
    medianUs: round(median(xs) * 1000, 0),
    p99Us: round(percentile(xs, 99) * 1000, 0),
    maxUs: round(Math.max(...xs) * 1000, 0),
  });
  const rebuildMs = median(rebuild);
  const add = stats(timings.add);
  const flip = stats(timings.flip);
  const remove = stats(timings.remove);
  return {
    endpoints: opts.endpoints,
    clients: opts.clients,
    localities: opts.localities,
    rounds: opts.rounds,
    claEntries: entries,
    entriesWhoseVersionMoved: affected,
    add,
    flip,
    remove,
    fullRebuildMs: round(rebuildMs, 1),
    speedupVsRebuild: round((rebuildMs * 1000) / Math.max(add.medianUs, flip.medianUs, remove.medianUs), 0),
  };
}
