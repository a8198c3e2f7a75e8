/**
 * The etcd backend, through the `etcd3` client: several `canopy serve` replicas on one etcd share their services.
 * Each write is one etcd transaction guarded by the service's revision, so two replicas never lose each other's
 * writes: a write computed against a stale view fails its compare and is redone against the fresh one (or is a
 * StoreConflict when the caller asked for a revision). The store revision is etcd's.
 *
 * Layout under the key prefix (service names cannot contain "/"): each service's `s/<name>` row and its 64
 * `b/<name>/<nn>` buckets of endpoints (etcd-layout.ts), and Store.putState's `x/<key>` rows (etcd-state.ts).
 * Every write rewrites the `s/` key, so its mod revision is the service's
 * revision, and `op` tells a watcher whether the transaction replaced the
 * service or patched some endpoints. With 64 buckets a PUT of any size is at
 * most 65 operations, inside etcd's default --max-txn-ops (128); its bytes
 * must fit --max-request-bytes (default 1.5 MiB, about 10k endpoints: raise it
 * for larger services).
 */
import type { Etcd3, IWatchResponse, Watcher } from 'etcd3';
import type { Endpoint, ServiceSpec } from '../../domain/service.js';
import { applyTransaction, EtcdLayout, readAll, resyncEvents, transactionsOf } from './etcd-layout.js';
import { toStored, type HeldService } from '../held-service.js';
import {
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
import { EtcdHealth, unreachable } from './etcd-health.js';
import { EtcdStateRows } from './etcd-state.js';
import { budgetOf, commitTxn, etcdClient, withinBudget, WRITE_BUDGET_MS, type Budget } from './etcd-retry.js';
import { EtcdWrites, type Op, type PendingEdit } from './etcd-writes.js';
import { WatchHistory } from '../watch-history.js';
import { CodedError } from '../../domain/errors.js';

export interface EtcdStoreOptions {
  /** host:port of each etcd member. */
  readonly endpoints: readonly string[];
  /** Key prefix, e.g. "/canopy/" (default); one per Canopy deployment sharing the etcd. */
  readonly prefix?: string;
}

/** How often a write whose compare failed because our view was stale is redone. */
const ATTEMPTS = 50;
/** How long one attempt of a write (of a small service) may wait for etcd to commit it, and the readiness read to answer. */
const ATTEMPT_MS = 1000;
/** More time for a large PUT: about 15 MB of JSON for 100k endpoints. */
const MS_PER_ENDPOINT = 0.05;

export class EtcdStore implements Store {
  private readonly services = new Map<string, HeldService>();
  private revision = 0;
  private readonly watchers = new Set<WatchHandlers>();
  private readonly history = new WatchHistory();
  private watcher: Watcher | undefined;
  private readonly health: EtcdHealth;
  private closed = false;
  private queue: Promise<unknown> = Promise.resolve();
  /** Per service, the edits waiting for the next transaction (editEndpoints). */
  private readonly editBatches = new Map<string, PendingEdit[]>();

  private readonly layout: EtcdLayout;
  private readonly writes: EtcdWrites;
  private readonly state: EtcdStateRows;

  private constructor(
    private readonly client: Etcd3,
    private readonly prefix: string,
    readonly description: string,
  ) {
    this.layout = new EtcdLayout(prefix);
    this.writes = new EtcdWrites(client, this.layout);
    this.state = new EtcdStateRows(client, prefix, ATTEMPT_MS);
    this.health = new EtcdHealth(
      () =>
        client
          .get(this.layout.serviceKey('\u0000readiness'))
          .options({ deadline: Date.now() + ATTEMPT_MS })
          .exec(),
      (healthy) => {
        for (const w of this.watchers) w.onHealth?.(healthy);
      },
    );
  }

  static async open(opts: EtcdStoreOptions): Promise<EtcdStore> {
    const prefix = opts.prefix ?? '/canopy/';
    const client = etcdClient(opts.endpoints);
    const store = new EtcdStore(client, prefix, `etcd:${opts.endpoints.join(',')}${prefix}`);
    try {
      await store.load();
    } catch (err) {
      client.close();
      throw new CodedError(
        'CANOPY_STORE_UNAVAILABLE',
        `cannot read the store from etcd at ${opts.endpoints.join(',')}: ${(err as Error).message}`,
      );
    }
    await store.follow();
    store.health.start();
    return store;
  }

  async get(name: string): Promise<StoredService | undefined> {
    const held = this.services.get(name);
    return held && toStored(held);
  }

  async list(): Promise<Snapshot> {
    const names = [...this.services.keys()].sort();
    return { revision: this.revision, services: names.map((n) => toStored(this.services.get(n)!)) };
  }

  put(spec: ServiceSpec, opts: PutOptions): Promise<number> {
    return this.guarded(
      spec.name,
      opts.ifRevision,
      (current) => this.writes.put(spec, opts, current),
      spec.endpoints.length,
    ).then((r) => r as number);
  }

  /** One transaction per service: etcd bounds the operations in one transaction (128 by default). */
  async putMany(entries: readonly PutEntry[]): Promise<number[]> {
    const revisions: number[] = [];
    for (const { spec, opts } of entries) revisions.push(await this.put(spec, opts));
    return revisions;
  }

  /**
   * All in one transaction, guarded by every service's revision: written together or not at all. etcd's
   * --max-txn-ops (128 by default) bounds how many services and buckets that can be.
   */
  putAll(entries: readonly PutEntry[]): Promise<number> {
    if (entries.length === 0) return Promise.resolve(this.revision);
    const attempt = () => this.commitAll(entries).catch(unreachable);
    const run = this.queue.then(attempt, attempt);
    this.queue = run.catch(() => {});
    return run;
  }

  patchEndpoints(
    name: string,
    upserts: readonly Endpoint[],
    removals: readonly string[],
    opts: { readonly ifRevision?: number } = {},
  ): Promise<number | undefined> {
    return this.guarded(
      name,
      opts.ifRevision,
      (current) => current && this.writes.patch(current, { upserts, removals }),
    );
  }

  /**
   * Group commit, as in the embedded store: the edits of one service that
   * arrive while this replica's previous write is in flight share the next
   * transaction. Each edit runs against the state the edits before it left,
   * and all of them run again against the fresh state after a lost
   * compare-and-swap; an edit that throws is refused alone.
   */
  editEndpoints(name: string, edit: (current: EndpointView) => EndpointEdit): Promise<number | undefined> {
    return new Promise((resolve, reject) => {
      let batch = this.editBatches.get(name);
      if (!batch) {
        const pending: PendingEdit[] = (batch = []);
        this.editBatches.set(name, pending);
        this.guarded(name, undefined, (current) => {
          // Later edits go to the next transaction from here on.
          if (this.editBatches.get(name) === pending) this.editBatches.delete(name);
          return current && this.writes.edits(current, pending);
        }).then(
          (revision) => {
            for (const p of pending) {
              if (p.error !== undefined) p.reject(p.error);
              else p.resolve(revision);
            }
          },
          (err: unknown) => pending.forEach((p) => p.reject(err)),
        );
      }
      batch.push({ edit, resolve, reject });
    });
  }

  delete(name: string, opts: { readonly ifRevision?: number } = {}): Promise<number | undefined> {
    return this.guarded(name, opts.ifRevision, (current) => {
      if (!current) return undefined;
      return [
        this.client.delete().key(this.layout.serviceKey(name)),
        this.client.delete().prefix(`${this.prefix}b/${name}/`),
      ];
    });
  }

  watch(fromRevision: number, handlers: WatchHandlers): () => void {
    this.history.replay(fromRevision, this.revision, handlers);
    this.watchers.add(handlers);
    handlers.onHealth?.(this.health.healthy);
    return () => this.watchers.delete(handlers);
  }

  getState(key: string): Promise<string | undefined> {
    return this.state.get(key);
  }

  async putState(key: string, value: string): Promise<void> {
    if (this.closed) throw new CodedError('CANOPY_STORE_CLOSED', 'the store is closed');
    await this.state.put(key, value);
  }

  async close(): Promise<void> {
    this.closed = true;
    this.health.stop();
    this.watchers.clear();
    await this.watcher?.cancel().catch(() => {});
    this.client.close();
  }

  /**
   * Commits `build`'s operations if the service is still at the revision they
   * were computed against, else waits for the newer write and rebuilds. This
   * replica's own writes go one at a time, so only other replicas contend.
   */
  private guarded(
    name: string,
    ifRevision: number | undefined,
    build: (current: HeldService | undefined) => Op[] | undefined,
    size = 0,
  ): Promise<number | undefined> {
    const attempt = () => this.commitGuarded(name, ifRevision, build, size).catch(unreachable);
    const run = this.queue.then(attempt, attempt);
    this.queue = run.catch(() => {});
    return run;
  }

  private async commitGuarded(
    name: string,
    ifRevision: number | undefined,
    build: (current: HeldService | undefined) => Op[] | undefined,
    size: number,
  ): Promise<number | undefined> {
    // One budget for the whole write, whatever it meets: an election, a lost quorum, another replica's writes.
    const end = budgetOf(
      WRITE_BUDGET_MS + Math.max(size, this.services.get(name)?.endpoints.size ?? 0) * MS_PER_ENDPOINT,
    );
    for (let attempt = 1; ; attempt++) {
      const current = this.services.get(name);
      const seen = current?.revision ?? 0;
      if (ifRevision !== undefined && ifRevision !== seen) {
        // Our view may only be behind: read the truth before calling it a conflict.
        const actual = await this.readRevision(name, end);
        if (actual !== ifRevision) throw new StoreConflict(name, ifRevision, actual);
        await this.caughtUpTo(actual);
        continue;
      }
      const ops = build(current);
      if (ops === undefined) return undefined;
      const result = await this.commit([[name, seen]], ops, end, current?.endpoints.size ?? size);
      if (result.succeeded) return result.revision;
      if (attempt >= ATTEMPTS) {
        throw new StoreConflict(name, seen, await this.readRevision(name, end));
      }
      // Another replica wrote this service: wait until our watch has its write, then decide again.
      await this.caughtUpTo(result.revision);
    }
  }

  private async commitAll(entries: readonly PutEntry[]): Promise<number> {
    const size = entries.reduce((n, e) => n + e.spec.endpoints.length, 0);
    const budget = budgetOf(WRITE_BUDGET_MS + size * MS_PER_ENDPOINT);
    for (let attempt = 1; ; attempt++) {
      const guards: [string, number][] = [];
      const ops: Op[] = [];
      for (const { spec, opts } of entries) {
        const current = this.services.get(spec.name);
        guards.push([spec.name, current?.revision ?? 0]);
        ops.push(...this.writes.put(spec, opts, current));
      }
      const stale = entries.findIndex((e, i) => e.opts.ifRevision !== undefined && e.opts.ifRevision !== guards[i]![1]);
      if (stale >= 0) {
        // Our view may only be behind: read the truth before calling it a conflict.
        const { spec, opts } = entries[stale]!;
        const actual = await this.readRevision(spec.name, budget);
        if (actual !== opts.ifRevision) throw new StoreConflict(spec.name, opts.ifRevision ?? 0, actual);
        await this.caughtUpTo(actual);
        continue;
      }
      const result = await this.commit(guards, ops, budget, size);
      if (result.succeeded) return result.revision;
      if (attempt >= ATTEMPTS) throw new StoreConflict(guards[0]![0], guards[0]![1], result.revision);
      // Another replica wrote one of them: wait until our watch has its write, then decide again.
      await this.caughtUpTo(result.revision);
    }
  }

  /**
   * One transaction of `ops`, if every named service is at its revision, retried through an election until
   * `end` (etcd-retry.ts). A committed write is in this store's view before the caller hears of it.
   */
  private async commit(
    guards: readonly (readonly [string, number])[],
    ops: Op[],
    budget: Budget,
    endpoints: number,
  ): Promise<{ succeeded: boolean; revision: number }> {
    const attemptMs = ATTEMPT_MS + endpoints * MS_PER_ENDPOINT;
    const result = await commitTxn(this.client, this.layout, guards, ops, budget, attemptMs);
    // Read-your-writes: the write is in this store's view before the caller hears of it.
    if (result.succeeded) await this.caughtUpTo(result.revision);
    return result;
  }

  private async readRevision(name: string, end = budgetOf(WRITE_BUDGET_MS)): Promise<number> {
    const r = await withinBudget('answer a read', end, ATTEMPT_MS, ({ deadline }) =>
      this.client.get(this.layout.serviceKey(name)).options({ deadline }).exec(),
    );
    return Number(r.kvs[0]?.mod_revision ?? 0);
  }

  private caughtUpTo(revision: number): Promise<void> {
    if (this.revision >= revision) return Promise.resolve();
    return new Promise((resolve) => {
      const handlers: WatchHandlers = {
        onEvents: () => {
          if (this.revision < revision) return;
          this.watchers.delete(handlers);
          resolve();
        },
      };
      this.watchers.add(handlers);
      // Covers a revision that carried none of our keys (the watch then reports nothing for it).
      setTimeout(() => {
        this.watchers.delete(handlers);
        resolve();
      }, 500).unref();
    });
  }

  private async load(): Promise<void> {
    const { revision, services } = await readAll(this.client, this.layout);
    this.revision = revision;
    for (const [name, held] of services) this.services.set(name, held);
  }

  /**
   * The watch was cancelled for good (etcd compacted the history it would
   * resume from, after a long partition): read the whole state again, report
   * the difference as events, and watch from there.
   */
  private async resync(): Promise<void> {
    const { revision, services } = await readAll(this.client, this.layout);
    const events = resyncEvents(this.services, services, revision);
    this.services.clear();
    for (const [name, held] of services) this.services.set(name, held);
    this.revision = revision;
    this.history.clear(); // older revisions cannot be replayed across the gap
    for (const w of [...this.watchers]) if (events.length > 0) w.onEvents(events);
    await this.follow();
    this.health.watch(true);
  }

  private watchEnded(): void {
    this.health.watch(false);
    if (this.closed) return;
    setTimeout(() => {
      if (!this.closed) this.resync().catch(() => this.watchEnded());
    }, 1000).unref();
  }

  private async follow(): Promise<void> {
    this.watcher = await this.client
      .watch()
      .prefix(this.prefix)
      .startRevision(String(this.revision + 1))
      .create();
    this.watcher.on('data', (res) => this.applyWatch(res));
    this.watcher.on('disconnected', () => this.health.watch(false));
    this.watcher.on('connected', () => this.health.watch(true));
    // A cancelled watch never resumes by itself (etcd3 drops it): start over from a fresh read.
    this.watcher.on('error', () => this.watchEnded());
  }

  /** One watch response → one StoreEvent per transaction (events of one revision). */
  private applyWatch(res: IWatchResponse): void {
    const events: StoreEvent[] = [];
    for (const [revision, txn] of transactionsOf(res)) {
      if (revision <= this.revision) continue;
      events.push(...applyTransaction(this.services, this.layout, revision, txn));
      this.revision = revision;
    }
    if (events.length === 0) return;
    this.history.record(events);
    for (const w of [...this.watchers]) w.onEvents(events);
  }
}
