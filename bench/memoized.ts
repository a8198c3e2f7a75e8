/**
 * Section 1b: CLA work against a fair baseline, a plain builder that does
 * the same work with every optimisation Canopy's tree has not got a monopoly
 * on. Each side starts from the endpoint list and ends with the bytes every
 * stream is sent (one contiguous CLA per client):
 *
 * - Canopy: build the locality tree, look each client up in a fresh CLA
 *   cache, and lay each distinct CLA out once as contiguous bytes that all of
 *   its streams share.
 * - plain builder memoized by tree node: group the healthy endpoints by
 *   locality (sorted as the tree orders them), encode each group's body once
 *   with the fastest encoder the project has (`encodeRunBody`: endpoints
 *   written in place, no per-endpoint parts), then build one CLA per distinct
 *   key, the deepest locality prefix of the client that has endpoints (the
 *   tree node the client matches: every client under one key gets the same
 *   bytes), assembling the groups' bodies with their failover priority in one
 *   write. No tree, no cache across runs.
 *
 * Both sides' bytes are compared for every client on every run: the bench
 * throws if they differ. The runs are interleaved pairs (Canopy, then the
 * baseline), so a burst of load from elsewhere lands on both sides alike.
 *
 * The incremental row: one endpoint's health flipped, then every CLA made
 * ready again. Canopy: the admin PATCH's call (`Mesh.patch`) and every cache
 * entry's resource brought up to date (version and length; the response
 * encoder copies the rope's parts). Baseline: the same builder redoing only
 * what the change touched: the changed locality's body re-encoded, and every
 * CLA that holds that locality rebuilt (in failover mode, all of them).
 */
import { ClaCache } from '../server/src/domain/cla-cache.js';
import type { Locality, Placement } from '../server/src/domain/locality.js';
import { localityKey } from '../server/src/domain/locality.js';
import { Mesh, type ServiceState } from '../server/src/domain/mesh.js';
import { endpointKey, type Endpoint, type ServiceSpec } from '../server/src/domain/service.js';
import { encodeClaBytes } from '../server/src/resources/endpoint/endpoint-codec.js';
import { encodeRunBody, policyField } from '../server/src/resources/endpoint/endpoint-parts.js';
import { serverClaCache } from '../server/src/resources/endpoint/endpoint.js';
import { makeResource, type Resource } from '../server/src/resources/resource.js';
import { ENDPOINT_TYPE } from '../server/src/resources/type-urls.js';
import { flatten, type Bytes } from '../server/src/wire/rope.js';
import { fieldSize, utf8Bytes, varintFieldSize, WireWriter } from '../server/src/wire/wire.js';
import { cpu, failoverService, makeClients, makeEndpoints, quiesce, wall } from './data.js';
import { MIN_RUNS, spread, type Spread } from './stats.js';

export interface MemoizedShape {
  readonly endpoints: number;
  readonly clients: number;
  readonly localities: number;
}

export interface MemoizedFigures extends MemoizedShape {
  readonly distinctClas: number;
  /** Keys the baseline built a CLA for (equal to distinctClas when its key is the one outputs are equal under). */
  readonly baselineBuilds: number;
  readonly canopyMs: Spread;
  readonly baselineMs: Spread;
  /** baseline / Canopy, per interleaved pair. */
  readonly timesCheaper: Spread;
  /** One health flip, every CLA ready again: µs per side and the per-pair ratio. */
  readonly incremental: { readonly canopyUs: Spread; readonly baselineUs: Spread; readonly timesCheaper: Spread };
  readonly pairs: number;
}

// ------------------------------------------------------------------ Canopy

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

// ------------------------------------------------------------------ baseline

interface Group {
  readonly locality: Locality;
  /** LocalityLbEndpoints less its priority, encoded once per build. */
  body: Uint8Array;
  endpoints: Endpoint[];
}

const byString = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/** Healthy endpoints grouped by locality, groups and endpoints in the tree's order (by value, then by address:port). */
function sortedGroups(endpoints: Iterable<Endpoint>): Group[] {
  const m = new Map<string, Group>();
  for (const ep of endpoints) {
    if (ep.health !== 'healthy') continue;
    const k = localityKey(ep.locality);
    let g = m.get(k);
    if (!g) m.set(k, (g = { locality: ep.locality, body: EMPTY, endpoints: [] }));
    g.endpoints.push(ep);
  }
  const groups = [...m.values()];
  for (const g of groups) {
    sortRun(g.endpoints);
    g.body = bodyOf(g);
  }
  return groups.sort(
    (a, b) =>
      byString(a.locality.region, b.locality.region) ||
      byString(a.locality.zone, b.locality.zone) ||
      byString(a.locality.subzone, b.locality.subzone),
  );
}

const EMPTY = new Uint8Array();

function sortRun(run: Endpoint[]): void {
  const keyed = run.map((e) => [endpointKey(e), e] as const).sort((a, b) => byString(a[0], b[0]));
  for (let i = 0; i < run.length; i++) run[i] = keyed[i]![1];
}

function bodyOf(g: Group): Uint8Array {
  let weight = 0;
  for (const e of g.endpoints) weight += e.weight;
  return encodeRunBody(g.locality, weight, g.endpoints);
}

/** How deep `l` matches the client `c` along region → zone → subzone. */
function depth(l: Locality, c: Locality): number {
  return l.region !== c.region ? 0 : l.zone !== c.zone ? 1 : l.subzone !== c.subzone ? 2 : 3;
}

/** The deepest prefix of the client's locality that some group lies under: the tree node the client matches. */
function nodeKey(prefixes: ReadonlySet<string>, c: Locality): string {
  const full = `${c.region}\u0000${c.zone}\u0000${c.subzone}`;
  if (prefixes.has(full)) return full;
  const zone = `${c.region}\u0000${c.zone}`;
  if (prefixes.has(zone)) return zone;
  return prefixes.has(c.region) ? c.region : '';
}

function prefixesOf(groups: readonly Group[]): Set<string> {
  const out = new Set<string>();
  for (const { locality: l } of groups) {
    out.add(l.region);
    out.add(`${l.region}\u0000${l.zone}`);
    out.add(`${l.region}\u0000${l.zone}\u0000${l.subzone}`);
  }
  return out;
}

/** Failover over region → zone → subzone, written in one pass: the deepest matching subtree first, then each wider one. */
function buildCla(groups: readonly Group[], c: Locality, name: Uint8Array, policy: Uint8Array): Uint8Array {
  let deepest = 0;
  const depths = new Uint8Array(groups.length);
  for (let i = 0; i < groups.length; i++) {
    const d = (depths[i] = depth(groups[i]!.locality, c));
    if (d > deepest) deepest = d;
  }
  // Priority per depth: a level no group reaches makes no tier.
  const priorityAt = [0, 0, 0, 0];
  let size = fieldSize(1, name.length) + policy.length;
  for (let d = deepest, p = 0; d >= 0; d--) {
    let any = false;
    for (let i = 0; i < groups.length; i++) if (depths[i] === d) any = true;
    if (any) priorityAt[d] = p++;
  }
  for (let i = 0; i < groups.length; i++) {
    const p = priorityAt[depths[i]!]!;
    size += fieldSize(2, groups[i]!.body.length + (p > 0 ? varintFieldSize(5, p) : 0));
  }
  const w = new WireWriter(size).bytes(1, name);
  for (let d = deepest; d >= 0; d--) {
    const p = priorityAt[d]!;
    for (let i = 0; i < groups.length; i++) {
      if (depths[i] !== d) continue;
      const body = groups[i]!.body;
      w.open(2, body.length + (p > 0 ? varintFieldSize(5, p) : 0)).raw(body);
      if (p > 0) w.uint(5, p);
    }
  }
  return w.raw(policy).finish();
}

interface Built {
  readonly bytes: Uint8Array[];
  readonly builds: number;
  readonly groups: Group[];
  readonly byKey: Map<string, Uint8Array>;
  /** A client locality per key, to rebuild each key's CLA. */
  readonly localityOf: Map<string, Locality>;
}

function baselineRun(spec: ServiceSpec, clients: readonly Placement[]): Built {
  const groups = sortedGroups(spec.endpoints);
  const prefixes = prefixesOf(groups);
  const name = utf8Bytes(spec.name);
  const policy = policyField(spec.loadBalancing.overprovisioningFactor);
  const byKey = new Map<string, Uint8Array>();
  const localityOf = new Map<string, Locality>();
  const bytes = clients.map((c) => {
    const k = nodeKey(prefixes, c.locality);
    let out = byKey.get(k);
    if (!out) {
      byKey.set(k, (out = buildCla(groups, c.locality, name, policy)));
      localityOf.set(k, c.locality);
    }
    return out;
  });
  return { bytes, builds: byKey.size, groups, byKey, localityOf };
}

/** The baseline after one endpoint changed: the changed locality's body again, and every CLA that holds it rebuilt. */
function baselineFlip(spec: ServiceSpec, b: Built, changed: Endpoint): number {
  const k = localityKey(changed.locality);
  const g = b.groups.find((x) => localityKey(x.locality) === k);
  if (!g) throw new Error('bench memo: the flipped endpoint has no group');
  const key = endpointKey(changed);
  const i = g.endpoints.findIndex((e) => endpointKey(e) === key);
  if (changed.health === 'healthy') {
    if (i < 0) {
      g.endpoints.push(changed);
      sortRun(g.endpoints);
    }
  } else if (i >= 0) g.endpoints.splice(i, 1);
  g.body = bodyOf(g);
  const name = utf8Bytes(spec.name);
  const policy = policyField(spec.loadBalancing.overprovisioningFactor);
  let bytes = 0;
  // Failover: every CLA lists every group, so each one holds the changed locality.
  for (const [key2, l] of b.localityOf) {
    const out = buildCla(b.groups, l, name, policy);
    b.byKey.set(key2, out);
    bytes += out.length;
  }
  return bytes;
}

// ------------------------------------------------------------------ incremental, Canopy

interface Prepared {
  readonly mesh: Mesh;
  readonly state: ServiceState;
  readonly cache: ReturnType<typeof serverClaCache>;
  readonly held: Map<unknown, Resource>;
}

function canopyPrepared(spec: ServiceSpec, clients: readonly Placement[]): Prepared {
  const mesh = new Mesh();
  mesh.put(spec);
  const state = mesh.get(spec.name) as ServiceState;
  const cache = serverClaCache();
  const p: Prepared = { mesh, state, cache, held: new Map() };
  for (const c of clients) cache.lookup(state, c);
  canopyReady(p);
  return p;
}

/** Every entry ready to send: its version (content digest) and length over the tree as it is now. */
function canopyReady(p: Prepared): number {
  let bytes = 0;
  for (const e of p.cache.entriesOf(p.state)) {
    let r = p.held.get(e);
    if (!r) p.held.set(e, (r = makeResource(p.state.name, ENDPOINT_TYPE, e.bytes)));
    void r.hash;
    bytes += r.any.length;
  }
  return bytes;
}

// ------------------------------------------------------------------ the comparison

function assertSameBytes(shape: MemoizedShape, a: readonly Uint8Array[], b: readonly Uint8Array[], when: string): void {
  if (a.length !== b.length) throw new Error(`bench memo: ${when}: ${a.length} vs ${b.length} clients`);
  for (let i = 0; i < a.length; i++) {
    if (Buffer.compare(a[i]!, b[i]!) !== 0) {
      throw new Error(
        `bench memo (${shape.endpoints}×${shape.clients}×${shape.localities}): ${when}: client ${i}'s CLA differs ` +
          `between Canopy (${a[i]!.length} B) and the baseline (${b[i]!.length} B): the comparison is void`,
      );
    }
  }
}

export async function memoizedComparison(shape: MemoizedShape, pairs = MIN_RUNS): Promise<MemoizedFigures> {
  const spec = failoverService('svc', makeEndpoints(shape.endpoints));
  const clients = makeClients(shape.clients, shape.localities);
  // Warm-up, so no side pays for JIT compilation in its figure. One small
  // service stays alive through the runs, as other services do in a running
  // server: without a live instance, the full GC before each run lets V8 drop
  // the tree's and ropes' hidden classes and deoptimize the code compiled for
  // them, which a server never pays.
  const resident = canopyRun(failoverService('resident', makeEndpoints(100)), clients.slice(0, 10)).live;
  for (let i = 0; i < 3; i++) {
    canopyRun(spec, clients);
    baselineRun(spec, clients);
  }
  const canopyMs: number[] = [];
  const baselineMs: number[] = [];
  const ratios: number[] = [];
  let distinct = 0;
  let builds = 0;
  for (let i = 0; i < pairs; i++) {
    await quiesce();
    const c = cpu(() => canopyRun(spec, clients).bytes);
    await quiesce();
    const b = cpu(() => baselineRun(spec, clients));
    canopyMs.push(c.ms);
    baselineMs.push(b.ms);
    ratios.push(b.ms / c.ms);
    assertSameBytes(shape, c.value, b.value.bytes, `run ${i + 1}`);
    distinct = new Set(c.value).size;
    builds = b.value.builds;
  }

  // Incremental: both sides hold the state of every client, then the same endpoint flips, pair by pair.
  const p = canopyPrepared(spec, clients);
  const base = baselineRun(spec, clients);
  const flips = spec.endpoints.filter((_, i) => i % 97 === 13).slice(0, pairs + 1);
  const inc = { canopy: [] as number[], baseline: [] as number[], ratios: [] as number[] };
  for (let r = -1; r < pairs; r++) {
    const ep = flips[(r + 1) % flips.length]!;
    for (const health of ['unhealthy', 'healthy'] as const) {
      const changed: Endpoint = { ...ep, health };
      await quiesce();
      const c = wall(() => (p.mesh.patch(spec.name, [changed]), canopyReady(p)));
      await quiesce();
      const b = wall(() => baselineFlip(spec, base, changed));
      if (r < 0) continue; // the warm-up round
      inc.canopy.push(c.ms * 1000);
      inc.baseline.push(b.ms * 1000);
      inc.ratios.push(b.ms / c.ms);
    }
  }
  // After the last flip both sides hold the same CLAs again: check a client of every key.
  const after = clients.map((c) => flatten(p.cache.lookup(p.state, c).bytes));
  const prefixes = prefixesOf(base.groups);
  assertSameBytes(
    shape,
    after,
    clients.map((c) => base.byKey.get(nodeKey(prefixes, c.locality))!),
    'after the flips',
  );
  if (resident === undefined) throw new Error('unreachable');
  return {
    ...shape,
    distinctClas: distinct,
    baselineBuilds: builds,
    canopyMs: spread(canopyMs),
    baselineMs: spread(baselineMs),
    timesCheaper: spread(ratios),
    incremental: {
      canopyUs: spread(inc.canopy),
      baselineUs: spread(inc.baseline),
      timesCheaper: spread(inc.ratios),
    },
    pairs,
  };
}
