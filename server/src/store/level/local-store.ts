/**
 * A store held in this process: the state is in memory and every write is
 * committed to a Journal (an embedded database, or nothing for a memory-only
 * store) before it is acknowledged and announced.
 *
 * Writes are applied one at a time, in arrival order, each against the state the writes before it left (a
 * read-modify-write never loses another's change), and committed in groups: the writes that arrive while one
 * durable write is in flight wait for it, then are applied in memory and share the next one (group commit). A
 * write is acknowledged, and watchers hear of it, only after its group is durable; a group whose commit fails is
 * undone and each of its writes rejected. `get` may see a group whose commit is in flight; `list` waits for it,
 * so a snapshot and the watch that follows it are durable.
 */
import { endpointKey, type Endpoint, type ServiceSpec } from '../../domain/service.js';
import {
  headOf,
  StoreConflict,
  type EndpointEdit,
  type EndpointView,
  type PutEntry,
  type PutOptions,
  type Snapshot,
  type Store,
  type StoredService,
  type StoreEvent,
  type WatchHandlers,
} from '../store.js';
import { toStored, type HeldService, type Journal, type JournalBatch, type JournalPut } from '../held-service.js';
import { WatchHistory } from '../watch-history.js';
import { JournalHealth } from './journal-health.js';
import { CodedError } from '../../domain/errors.js';

/** One write while a group is being built: how to stage it, undo it, and what it announces. */
interface Group {
  readonly batch: JournalBatch | undefined;
  readonly undo: (() => void)[];
  readonly events: StoreEvent[];
}

interface PendingWrite {
  /** Applies the write in memory and stages it; throws (changing nothing) to refuse it. */
  readonly apply: (group: Group) => unknown;
  readonly resolve: (value: unknown) => void;
  readonly reject: (err: unknown) => void;
}

export class LocalStore implements Store {
  private readonly services = new Map<string, HeldService>();
  /** Each service's endpoint weight sum, kept as writes land (a PATCH checks it against uint32). */
  private readonly weights = new Map<string, number>();
  private revision = 0;
  /** The revision of the last durable write: what a watcher may be replayed up to. */
  private durable = 0;
  private readonly history = new WatchHistory();
  private readonly watchers = new Set<WatchHandlers>();
  private pending: PendingWrite[] = [];
  /** A group commit is in progress; `flushed` settles when it ends. */
  private flushing = false;
  private flushed: Promise<void> = Promise.resolve();
  private closed = false;
  /** Readiness: not ready from a failed commit until a write succeeds (journal-health.ts). */
  private readonly health: JournalHealth;
  /** Store.getState's values, when the journal keeps none (memory only). */
  private readonly state = new Map<string, string>();

  protected constructor(
    private readonly journal: Journal | undefined,
    private readonly maxGroup: number,
  ) {
    this.health = new JournalHealth(
      journal,
      () => this.flushing || this.closed,
      (healthy) => {
        for (const w of this.watchers) w.onHealth?.(healthy);
      },
    );
  }

  /**
   * Opens the store over `journal` (loading what it holds), or memory-only
   * without one. `maxGroup` bounds the writes one commit carries (default: no
   * bound; 1 is one durable write per change, the benchmarks' baseline).
   */
  static async open(journal?: Journal, opts: { readonly maxGroup?: number } = {}): Promise<LocalStore> {
    const store = new LocalStore(journal, opts.maxGroup ?? Infinity);
    if (journal) {
      const loaded = await journal.load();
      store.revision = store.durable = loaded.revision;
      for (const s of loaded.services) {
        store.services.set(s.head.name, s);
      }
    }
    return store;
  }

  get description(): string {
    return this.journal?.description ?? 'memory';
  }

  async get(name: string): Promise<StoredService | undefined> {
    const held = this.services.get(name);
    return held && toStored(held);
  }

  async list(): Promise<Snapshot> {
    await this.settled();
    const services = [...this.services.values()].sort((a, b) => compare(a.head.name, b.head.name)).map(toStored);
    return { revision: this.revision, services };
  }

  put(spec: ServiceSpec, opts: PutOptions): Promise<number> {
    return this.write((g) => {
      const [write] = this.prepare([{ spec, opts }]);
      this.applyPuts(g, [write!]);
      return write!.revision;
    });
  }

  putMany(entries: readonly PutEntry[]): Promise<number[]> {
    return this.write((g) => {
      const writes = this.prepare(entries);
      this.applyPuts(g, writes);
      return writes.map((w) => w.revision);
    });
  }

  /** putMany already commits all or none, in one synced batch. */
  async putAll(entries: readonly PutEntry[]): Promise<number> {
    return (await this.putMany(entries)).at(-1) ?? this.revision;
  }

  /** Checks every condition before anything is written, and numbers the puts from the next revision. */
  private prepare(entries: readonly PutEntry[]): JournalPut[] {
    const names = new Set<string>();
    for (const { spec, opts } of entries) {
      if (names.has(spec.name))
        throw new CodedError('CANOPY_STORE_BAD_WRITE', `service "${spec.name}" is put twice in one write`);
      names.add(spec.name);
      checkRevision(spec.name, this.services.get(spec.name), opts.ifRevision);
    }
    return entries.map(({ spec, opts }, i) => {
      const current = this.services.get(spec.name);
      const fileDigest = opts.keepFileDigest ? current?.fileDigest : opts.fileDigest;
      const service: HeldService = {
        head: headOf(spec),
        owner: opts.owner,
        ...(fileDigest !== undefined ? { fileDigest } : {}),
        revision: this.revision + 1 + i,
        endpoints: new Map(spec.endpoints.map((e) => [endpointKey(e), e])),
      };
      return { revision: service.revision, service };
    });
  }

  private applyPuts(g: Group, writes: readonly JournalPut[]): void {
    for (const w of writes) {
      const name = w.service.head.name;
      this.replace(g, name, w.service, sumWeights(w.service.endpoints.values()));
      g.batch?.put(w.revision, w.service);
      g.events.push({ kind: 'put', revision: w.revision, service: toStored(w.service) });
    }
    this.advance(g, writes[writes.length - 1]?.revision ?? this.revision);
  }

  patchEndpoints(
    name: string,
    upserts: readonly Endpoint[],
    removals: readonly string[],
    opts: { readonly ifRevision?: number } = {},
  ): Promise<number | undefined> {
    return this.write((g) => {
      const current = this.services.get(name);
      if (!current) return undefined;
      checkRevision(name, current, opts.ifRevision);
      return this.applyPatch(g, current, { upserts, removals });
    });
  }

  editEndpoints(name: string, edit: (current: EndpointView) => EndpointEdit): Promise<number | undefined> {
    return this.write((g) => {
      const current = this.services.get(name);
      if (!current) return undefined;
      const change = edit({
        name,
        size: current.endpoints.size,
        get: (key) => current.endpoints.get(key),
        totalWeight: () => this.weightOf(name),
      });
      return this.applyPatch(g, current, change);
    });
  }

  /** Changes the endpoints in place (a copy would cost O(service) per patch); the group's undo puts them back. */
  private applyPatch(g: Group, current: HeldService, { upserts, removals }: EndpointEdit): number {
    const name = current.head.name;
    const revision = this.revision + 1;
    const endpoints = current.endpoints;
    const previous = new Map<string, Endpoint | undefined>();
    const remember = (k: string) => previous.has(k) || previous.set(k, endpoints.get(k));
    let weight = this.weightOf(name);
    for (const e of upserts) {
      const k = endpointKey(e);
      remember(k);
      weight += e.weight - (endpoints.get(k)?.weight ?? 0);
      endpoints.set(k, e);
    }
    const removed: string[] = [];
    for (const k of removals) {
      const held = endpoints.get(k);
      if (!held) continue;
      remember(k);
      weight -= held.weight;
      endpoints.delete(k);
      removed.push(k);
    }
    g.undo.push(() => {
      for (const [k, e] of previous) {
        if (e) endpoints.set(k, e);
        else endpoints.delete(k);
      }
    });
    const held: HeldService = {
      head: current.head,
      owner: current.owner,
      ...(current.fileDigest !== undefined ? { fileDigest: current.fileDigest } : {}),
      revision,
      endpoints,
    };
    this.replace(g, name, held, weight);
    g.batch?.patch(revision, held, upserts, removed);
    g.events.push({ kind: 'patch', revision, name, upserts, removals: removed });
    this.advance(g, revision);
    return revision;
  }

  delete(name: string, opts: { readonly ifRevision?: number } = {}): Promise<number | undefined> {
    return this.write((g) => {
      const current = this.services.get(name);
      if (!current) return undefined;
      checkRevision(name, current, opts.ifRevision);
      const revision = this.revision + 1;
      this.replace(g, name, undefined, 0);
      g.batch?.delete(revision, name);
      g.events.push({ kind: 'delete', revision, name });
      this.advance(g, revision);
      return revision;
    });
  }

  watch(fromRevision: number, handlers: WatchHandlers): () => void {
    this.history.replay(fromRevision, this.durable, handlers);
    this.watchers.add(handlers);
    if (!this.health.ready) handlers.onHealth?.(false);
    return () => this.watchers.delete(handlers);
  }

  async getState(key: string): Promise<string | undefined> {
    return this.journal?.getState ? this.journal.getState(key) : this.state.get(key);
  }

  async putState(key: string, value: string): Promise<void> {
    if (this.closed) throw new CodedError('CANOPY_STORE_CLOSED', 'the store is closed');
    if (this.journal?.putState) await this.journal.putState(key, value);
    else this.state.set(key, value);
  }

  async close(): Promise<void> {
    this.closed = true;
    this.health.stop();
    await this.settled();
    this.watchers.clear();
    await this.journal?.close();
  }

  /** A service's endpoint weight sum: kept as writes land, worked out on first need after a load. */
  private weightOf(name: string): number {
    let w = this.weights.get(name);
    if (w === undefined) {
      const held = this.services.get(name);
      if (!held) return 0;
      w = sumWeights(held.loaded ?? held.endpoints.values());
      this.weights.set(name, w);
    }
    return w;
  }

  /** Sets a service (undefined: removes it) and its weight sum, with the undo. */
  private replace(g: Group, name: string, held: HeldService | undefined, weight: number): void {
    const before = this.services.get(name);
    const beforeWeight = this.weights.get(name);
    g.undo.push(() => {
      if (before) this.services.set(name, before);
      else this.services.delete(name);
      if (beforeWeight !== undefined) this.weights.set(name, beforeWeight);
      else this.weights.delete(name);
    });
    if (held) {
      this.services.set(name, held);
      this.weights.set(name, weight);
    } else {
      this.services.delete(name);
      this.weights.delete(name);
    }
  }

  private advance(g: Group, revision: number): void {
    const before = this.revision;
    g.undo.push(() => {
      this.revision = before;
    });
    this.revision = revision;
  }

  /** Queues a write for the next group; starts a group commit unless one is in flight. */
  private write<T>(apply: (g: Group) => T): Promise<T> {
    if (this.closed) return Promise.reject(new CodedError('CANOPY_STORE_CLOSED', 'the store is closed'));
    return new Promise<T>((resolve, reject) => {
      this.pending.push({ apply, resolve: resolve as (v: unknown) => void, reject });
      if (!this.flushing) this.flushed = this.flush();
    });
  }

  /** Commits groups until no write is waiting: each group is everything that arrived during the last commit. */
  private async flush(): Promise<void> {
    this.flushing = true;
    while (this.pending.length > 0) {
      const writes = this.pending.splice(0, this.maxGroup);
      const group: Group = { batch: this.journal?.begin(), undo: [], events: [] };
      const applied: { write: PendingWrite; result: unknown }[] = [];
      for (const write of writes) {
        const mark = group.undo.length;
        const announced = group.events.length;
        try {
          applied.push({ write, result: write.apply(group) });
        } catch (err) {
          // Refused before it changed anything; whatever it did change is put back.
          for (const u of group.undo.splice(mark).reverse()) u();
          group.events.length = announced;
          write.reject(err);
        }
      }
      if (applied.length === 0) continue;
      try {
        if (group.batch && group.batch.size > 0) await group.batch.commit();
      } catch (err) {
        group.batch?.rollback();
        for (const u of group.undo.reverse()) u();
        for (const { write } of applied) write.reject(err);
        this.health.set(false);
        continue;
      }
      this.health.set(true);
      if (group.events.length > 0) this.announce(group.events);
      for (const { write, result } of applied) write.resolve(result);
    }
    // In the same turn as the last check of `pending`: a write queued after it starts a new flush.
    this.flushing = false;
  }

  /** Resolves once no group commit is in flight. */
  private async settled(): Promise<void> {
    while (this.flushing) await this.flushed;
  }

  /** Events of consecutive revisions, already durable. */
  private announce(events: readonly StoreEvent[]): void {
    this.durable = events[events.length - 1]!.revision;
    this.history.record(events);
    for (const w of this.watchers) {
      try {
        w.onEvents(events);
      } catch (err) {
        // A watcher's bug must not fail a write that is already durable: surface it as uncaught.
        queueMicrotask(() => {
          throw err;
        });
      }
    }
  }
}

function sumWeights(endpoints: Iterable<Endpoint>): number {
  let n = 0;
  for (const e of endpoints) n += e.weight;
  return n;
}

function checkRevision(name: string, current: HeldService | undefined, expected: number | undefined): void {
  if (expected === undefined) return;
  const actual = current?.revision ?? 0;
  if (actual !== expected) throw new StoreConflict(name, expected, actual);
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
