/**
 * The served Mesh, built only from a Store: a snapshot at open, then the
 * store's watch. Every replica builds its Mesh this way, so all of them end
 * up with the same services and therefore the same content-hash versions.
 *
 * Every source reaches the Mesh here (the file, the admin API, Kubernetes,
 * whatever another replica or an older version wrote), so here each write is
 * screened by the admin API's own rules (domain/spec-screen.ts) before it is
 * served: what they refuse is left out and recorded (input-skips.ts). What is
 * served is a function of what the store holds, so replicas still agree.
 */
import { Mesh, type MeshChange } from '../domain/mesh.js';
import { endpointKey, type Endpoint, type ServiceSpec } from '../domain/service.js';
import { screenService, screenUpserts, skipReason, type SkippedPart } from '../domain/spec-screen.js';
import { InputSkips, type InputSkip } from './input-skips.js';
import type { Store, StoreEvent } from './store.js';

export type ChangeListener = (changes: readonly MeshChange[]) => void;

/** What readers of the served services need; nothing here writes. */
export type MeshView = Pick<Mesh, 'get' | 'list' | 'size'>;

export interface MeshFeedOptions {
  /** Where what is left out is recorded (default: a registry of its own). */
  readonly skips?: InputSkips;
}

export class MeshFeed {
  readonly mesh = new Mesh();
  readonly skips: InputSkips;
  /** Who wrote each service, for the skip entries of its later patches. */
  private readonly owners = new Map<string, string>();
  /** Services refused as a whole, as the store holds them: a later patch is applied here and screened again. */
  private readonly refused = new Map<string, ServiceSpec>();
  private applied = 0;
  private healthy = true;
  private readonly listeners = new Set<ChangeListener>();
  private waiters: { revision: number; resolve: () => void }[] = [];
  private stopWatch: () => void = () => {};

  private constructor(opts: MeshFeedOptions) {
    this.skips = opts.skips ?? new InputSkips();
  }

  static async open(store: Store, opts: MeshFeedOptions = {}): Promise<MeshFeed> {
    const feed = new MeshFeed(opts);
    const snapshot = await store.list();
    for (const s of snapshot.services) feed.put(s.spec, s.owner);
    feed.applied = snapshot.revision;
    feed.stopWatch = store.watch(snapshot.revision, {
      onEvents: (events) => feed.apply(events),
      onHealth: (healthy) => {
        feed.healthy = healthy;
      },
    });
    return feed;
  }

  /** The last store revision reflected in the mesh. */
  get revision(): number {
    return this.applied;
  }

  /** False while the backend is unreachable: the mesh is the last state seen. */
  get connected(): boolean {
    return this.healthy;
  }

  /**
   * Where a served service came from, for a log line (a NACK's): the config file, the admin API, or the
   * Kubernetes Service `namespace/name` (its Canopy name is `name.namespace`).
   */
  originOf(name: string): string | undefined {
    const owner = this.owners.get(name);
    if (owner === 'kube') {
      const dot = name.lastIndexOf('.');
      return dot > 0 ? `Kubernetes Service ${name.slice(dot + 1)}/${name.slice(0, dot)}` : 'Kubernetes';
    }
    return owner === 'file' ? 'the config file' : owner === 'api' ? 'the admin API' : owner;
  }

  subscribe(listener: ChangeListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Resolves once the mesh reflects `revision`: a writer's read-your-writes. */
  caughtUp(revision: number): Promise<void> {
    if (revision <= this.applied) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push({ revision, resolve }));
  }

  close(): void {
    this.stopWatch();
    for (const w of this.waiters) w.resolve();
    this.waiters = [];
  }

  private apply(events: readonly StoreEvent[]): void {
    const changes: MeshChange[] = [];
    // One batch may hold several events of one revision (a store's resync after a gap).
    const from = this.applied;
    for (const e of events) {
      if (e.revision <= from) continue; // replayed after a reconnect
      const change =
        e.kind === 'put'
          ? this.put(e.service.spec, e.service.owner)
          : e.kind === 'patch'
            ? this.patch(e.name, e.upserts, e.removals)
            : this.delete(e.name);
      if (change) merge(changes, change);
      this.applied = e.revision;
    }
    if (changes.length > 0) for (const l of this.listeners) l(changes);
    const due = this.waiters.filter((w) => w.revision <= this.applied);
    if (due.length === 0) return;
    this.waiters = this.waiters.filter((w) => w.revision > this.applied);
    for (const w of due) w.resolve();
  }

  /** A whole service as written: what the rules accept is served, the rest recorded. */
  private put(spec: ServiceSpec, owner: string | undefined): MeshChange | undefined {
    const name = String((spec as { name?: unknown }).name);
    const source = typeof owner === 'string' ? owner : 'store';
    this.owners.set(name, source);
    const screened = screenService(spec);
    const entries = new Map<string, InputSkip>();
    for (const p of screened.skipped) {
      const id = p.endpoint ?? `service:${p.path}`;
      if (!entries.has(id)) entries.set(id, this.entry(name, source, p, screened.spec === undefined));
    }
    this.skips.replace(scopeOf(name), entries);
    if (!screened.spec) {
      this.refused.set(name, spec);
      return this.mesh.delete(name);
    }
    this.refused.delete(name);
    return this.mesh.put(screened.spec);
  }

  /** Endpoints written into a service: each upsert screened under the service's settings. */
  private patch(name: string, upserts: readonly Endpoint[], removals: readonly string[]): MeshChange | undefined {
    const source = this.owners.get(name) ?? 'store';
    const refused = this.refused.get(name);
    if (refused) return this.put(patched(refused, upserts, removals), source);
    const state = this.mesh.get(name);
    if (!state) return undefined;
    const scope = scopeOf(name);
    const screened = screenUpserts(state.spec, upserts);
    const out = [...removals];
    if (this.skips.has(scope)) {
      for (const k of removals) this.skips.update(scope, k, undefined);
      for (const e of screened.upserts) this.skips.update(scope, endpointKey(e), undefined);
    }
    for (const p of screened.skipped) {
      const key = p.endpoint ?? `service:${p.path}`;
      this.skips.update(scope, key, this.entry(name, source, p, false));
      if (state.endpoints.has(key)) out.push(key);
    }
    return this.mesh.patch(name, screened.upserts, out);
  }

  private delete(name: string): MeshChange | undefined {
    this.owners.delete(name);
    this.refused.delete(name);
    this.skips.replace(scopeOf(name), new Map());
    return this.mesh.delete(name);
  }

  private entry(service: string, source: string, p: SkippedPart, whole: boolean): InputSkip {
    // An endpoint's field is named within the endpoint: its index differs between a put and a patch.
    const path = p.endpoint !== undefined ? p.path.replace(/^endpoints\[\d+\]\.?/, '') : p.path;
    return {
      source,
      object: p.endpoint !== undefined ? `service ${service}, endpoint ${p.endpoint}` : `service ${service}`,
      service,
      path,
      ...(p.value !== undefined ? { value: p.value } : {}),
      message: p.message,
      reason: skipReason(p.path),
      left: whole ? 'service' : 'endpoint',
    };
  }
}

function scopeOf(name: string): string {
  return `store:${name}`;
}

/** A refused service's spec with a patch applied, keyed as the store keys endpoints. */
function patched(spec: ServiceSpec, upserts: readonly Endpoint[], removals: readonly string[]): ServiceSpec {
  const list: unknown = (spec as { endpoints?: unknown }).endpoints;
  const byKey = new Map<string, unknown>();
  if (Array.isArray(list)) for (const e of list as unknown[]) byKey.set(keyOf(e), e);
  for (const k of removals) byKey.delete(k);
  for (const e of upserts) byKey.set(keyOf(e), e);
  return { ...spec, endpoints: [...byKey.values()] as Endpoint[] };
}

function keyOf(e: unknown): string {
  const { address, port } = (typeof e === 'object' && e !== null ? e : {}) as { address?: unknown; port?: unknown };
  const a = String(address);
  return a.includes(':') ? `[${a}]:${String(port)}` : `${a}:${String(port)}`;
}

/**
 * Adds `change`, folding an update into the previous change of the same
 * service when that is the last one: a group commit of 64 PATCHes of one
 * service is one change to log and push, not 64.
 */
function merge(changes: MeshChange[], change: MeshChange): void {
  const last = changes[changes.length - 1];
  if (!last || last.service !== change.service || change.kind !== 'updated' || last.kind === 'deleted') {
    changes.push(change);
    return;
  }
  const endpoints = new Set(last.endpoints);
  for (const k of change.endpoints) endpoints.add(k);
  changes[changes.length - 1] = { ...last, endpoints: [...endpoints] };
}
