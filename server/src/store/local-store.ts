/**
 * A store held in this process: the state is in memory and every write is
 * first committed to a Journal (an embedded database, or nothing for a
 * memory-only store), then applied and announced. Writes are serialised, so
 * revisions are assigned in order and a watcher sees them in that order.
 */
import { endpointKey, type Endpoint, type ServiceSpec } from '../domain/service.js';
import {
  headOf,
  StoreConflict,
  type PutEntry,
  type PutOptions,
  type ServiceHead,
  type Snapshot,
  type Store,
  type StoredService,
  type StoreEvent,
  type WatchHandlers,
} from './store.js';
import { WatchHistory } from './watch-history.js';

/** A service as held: the head and the endpoints by key, so a patch touches only its keys. */
export interface HeldService {
  readonly head: ServiceHead;
  readonly owner: StoredService['owner'];
  readonly fileDigest?: string;
  readonly revision: number;
  readonly endpoints: Map<string, Endpoint>;
}

/** Durable writes of one revision each; each call is atomic. */
export interface Journal {
  readonly description: string;
  load(): Promise<{ revision: number; services: HeldService[] }>;
  put(revision: number, service: HeldService, removedKeys: readonly string[]): Promise<void>;
  /** Several puts (revisions in increasing order) as one atomic write. */
  putMany(puts: readonly JournalPut[]): Promise<void>;
  patch(revision: number, service: HeldService, upserts: readonly Endpoint[], removals: readonly string[]): Promise<void>;
  delete(revision: number, name: string, endpointKeys: readonly string[]): Promise<void>;
  close(): Promise<void>;
}

export interface JournalPut {
  readonly revision: number;
  readonly service: HeldService;
  readonly removedKeys: readonly string[];
}

/** How many past events a late watcher can be replayed. */

export class LocalStore implements Store {
  private readonly services = new Map<string, HeldService>();
  private revision = 0;
  private readonly history = new WatchHistory();
  private readonly watchers = new Set<WatchHandlers>();
  private queue: Promise<unknown> = Promise.resolve();

  private constructor(private readonly journal: Journal | undefined) {}

  /** Opens the store over `journal` (loading what it holds), or memory-only without one. */
  static async open(journal?: Journal): Promise<LocalStore> {
    const store = new LocalStore(journal);
    if (journal) {
      const loaded = await journal.load();
      store.revision = loaded.revision;
      for (const s of loaded.services) store.services.set(s.head.name, s);
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
    const services = [...this.services.values()].sort((a, b) => compare(a.head.name, b.head.name)).map(toStored);
    return { revision: this.revision, services };
  }

  put(spec: ServiceSpec, opts: PutOptions): Promise<number> {
    return this.serialise(async () => {
      const [write] = this.prepare([{ spec, opts }]);
      await this.journal?.put(write!.revision, write!.service, write!.removedKeys);
      this.apply([write!]);
      return write!.revision;
    });
  }

  putMany(entries: readonly PutEntry[]): Promise<number[]> {
    return this.serialise(async () => {
      const writes = this.prepare(entries);
      if (writes.length === 0) return [];
      await this.journal?.putMany(writes);
      this.apply(writes);
      return writes.map((w) => w.revision);
    });
  }

  /** Checks every condition before anything is written, and numbers the puts from the next revision. */
  private prepare(entries: readonly PutEntry[]): JournalPut[] {
    const names = new Set<string>();
    for (const { spec, opts } of entries) {
      if (names.has(spec.name)) throw new Error(`service "${spec.name}" is put twice in one write`);
      names.add(spec.name);
      checkRevision(spec.name, this.services.get(spec.name), opts.ifRevision);
    }
    return entries.map(({ spec, opts }, i) => {
      const current = this.services.get(spec.name);
      const revision = this.revision + 1 + i;
      const endpoints = new Map(spec.endpoints.map((e) => [endpointKey(e), e]));
      const service: HeldService = {
        head: headOf(spec),
        owner: opts.owner,
        ...(opts.fileDigest !== undefined ? { fileDigest: opts.fileDigest } : {}),
        revision,
        endpoints,
      };
      const removedKeys = current ? [...current.endpoints.keys()].filter((k) => !endpoints.has(k)) : [];
      return { revision, service, removedKeys };
    });
  }

  /** Durable puts into memory, announced to watchers in one batch. */
  private apply(writes: readonly JournalPut[]): void {
    for (const w of writes) this.services.set(w.service.head.name, w.service);
    this.commit(writes.map((w) => ({ kind: 'put', revision: w.revision, service: toStored(w.service) })));
  }

  patchEndpoints(
    name: string,
    upserts: readonly Endpoint[],
    removals: readonly string[],
    opts: { readonly ifRevision?: number } = {},
  ): Promise<number | undefined> {
    return this.serialise(async () => {
      const current = this.services.get(name);
      if (!current) return undefined;
      checkRevision(name, current, opts.ifRevision);
      const revision = this.revision + 1;
      // Changed in place (a copy would cost O(service) per patch), and put back if the journal fails.
      const endpoints = current.endpoints;
      const previous = new Map<string, Endpoint | undefined>();
      const remember = (k: string) => previous.has(k) || previous.set(k, endpoints.get(k));
      for (const e of upserts) {
        remember(endpointKey(e));
        endpoints.set(endpointKey(e), e);
      }
      const removed = removals.filter((k) => endpoints.has(k) && remember(k) && endpoints.delete(k));
      const held: HeldService = { ...current, revision, endpoints };
      try {
        await this.journal?.patch(revision, held, upserts, removed);
      } catch (err) {
        for (const [k, e] of previous) {
          if (e) endpoints.set(k, e);
          else endpoints.delete(k);
        }
        throw err;
      }
      this.services.set(name, held);
      this.commit([{ kind: 'patch', revision, name, upserts, removals: removed }]);
      return revision;
    });
  }

  delete(name: string, opts: { readonly ifRevision?: number } = {}): Promise<number | undefined> {
    return this.serialise(async () => {
      const current = this.services.get(name);
      if (!current) return undefined;
      checkRevision(name, current, opts.ifRevision);
      const revision = this.revision + 1;
      await this.journal?.delete(revision, name, [...current.endpoints.keys()]);
      this.services.delete(name);
      this.commit([{ kind: 'delete', revision, name }]);
      return revision;
    });
  }

  watch(fromRevision: number, handlers: WatchHandlers): () => void {
    this.history.replay(fromRevision, this.revision, handlers);
    this.watchers.add(handlers);
    return () => this.watchers.delete(handlers);
  }

  async close(): Promise<void> {
    await this.queue.catch(() => {});
    this.watchers.clear();
    await this.journal?.close();
  }

  /** Events of consecutive revisions, already durable. */
  private commit(events: readonly StoreEvent[]): void {
    this.revision = events[events.length - 1]!.revision;
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

  /** One write at a time: a failed write rejects its caller and leaves the queue usable. */
  private serialise<T>(write: () => Promise<T>): Promise<T> {
    const run = this.queue.then(write, write);
    this.queue = run.catch(() => {});
    return run;
  }
}

function checkRevision(name: string, current: HeldService | undefined, expected: number | undefined): void {
  if (expected === undefined) return;
  const actual = current?.revision ?? 0;
  if (actual !== expected) throw new StoreConflict(name, expected, actual);
}

export function toStored(held: HeldService): StoredService {
  return {
    spec: { ...held.head, endpoints: [...held.endpoints.values()] },
    owner: held.owner,
    ...(held.fileDigest !== undefined ? { fileDigest: held.fileDigest } : {}),
    revision: held.revision,
  };
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
