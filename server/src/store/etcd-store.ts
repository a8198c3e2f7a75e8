/**
 * The etcd backend, through the `etcd3` client: several `canopy serve`
 * replicas on one etcd share their services. Each write is one etcd
 * transaction guarded by the service's revision, so two replicas never lose
 * each other's writes: a write computed against a stale view fails its
 * compare and is redone against the fresh one (or is a StoreConflict when
 * the caller asked for a revision). The store revision is etcd's.
 *
 * Layout under the key prefix (service names cannot contain "/"):
 *   <prefix>s/<name>          { head, owner, fileDigest?, op: 'put' | 'patch' }
 *   <prefix>e/<name>/<key>    an endpoint
 * Every write rewrites the `s/` key, so its mod revision is the service's
 * revision, and `op` tells a watcher whether the transaction replaced the
 * service or patched some endpoints.
 */
import { Etcd3, type IWatchResponse, type Watcher } from 'etcd3';
import { endpointKey, type Endpoint, type ServiceSpec } from '../domain/service.js';
import { toStored, type HeldService } from './local-store.js';
import {
  headOf,
  StoreConflict,
  type PutOptions,
  type ServiceHead,
  type Snapshot,
  type Store,
  type StoredService,
  type StoreEvent,
  type WatchHandlers,
} from './store.js';

type Op = ReturnType<Etcd3['put']> | ReturnType<Etcd3['delete']>;

export interface EtcdStoreOptions {
  /** host:port of each etcd member. */
  readonly endpoints: readonly string[];
  /** Key prefix, e.g. "/canopy/" (default); one per Canopy deployment sharing the etcd. */
  readonly prefix?: string;
}

type Row = { head: ServiceHead; owner: HeldService['owner']; fileDigest?: string; op: 'put' | 'patch' };

/** How often a write whose compare failed because our view was stale is redone. */
const ATTEMPTS = 50;
/** How many past events a late watcher can be replayed. */
const HISTORY = 4096;

export class EtcdStore implements Store {
  private readonly services = new Map<string, HeldService>();
  private revision = 0;
  private readonly watchers = new Set<WatchHandlers>();
  private readonly history: StoreEvent[] = [];
  private watcher: Watcher | undefined;
  private healthy = true;
  private queue: Promise<unknown> = Promise.resolve();

  private constructor(
    private readonly client: Etcd3,
    private readonly prefix: string,
    readonly description: string,
  ) {}

  static async open(opts: EtcdStoreOptions): Promise<EtcdStore> {
    const prefix = opts.prefix ?? '/canopy/';
    const client = new Etcd3({
      hosts: opts.endpoints.map((h) => (h.includes('://') ? h : `http://${h}`)),
      dialTimeout: 5000,
      // A 100k-endpoint service arrives as one watch response far above gRPC's 4 MB default.
      grpcOptions: { 'grpc.max_receive_message_length': -1, 'grpc.max_send_message_length': -1 },
    });
    const store = new EtcdStore(client, prefix, `etcd:${opts.endpoints.join(',')}${prefix}`);
    try {
      await store.load();
    } catch (err) {
      client.close();
      throw new Error(`cannot read the store from etcd at ${opts.endpoints.join(',')}: ${(err as Error).message}`);
    }
    await store.follow();
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
    return this.guarded(spec.name, opts.ifRevision, (current) => {
      const endpoints = new Map(spec.endpoints.map((e) => [endpointKey(e), e]));
      const row: Row = {
        head: headOf(spec),
        owner: opts.owner,
        ...(opts.fileDigest !== undefined ? { fileDigest: opts.fileDigest } : {}),
        op: 'put',
      };
      const ops: Op[] = [this.client.put(this.serviceKey(spec.name)).value(JSON.stringify(row))];
      for (const key of current?.endpoints.keys() ?? []) {
        if (!endpoints.has(key)) ops.push(this.client.delete().key(this.endpointKey(spec.name, key)));
      }
      for (const [key, ep] of endpoints) {
        const old = current?.endpoints.get(key);
        if (old === undefined || JSON.stringify(old) !== JSON.stringify(ep)) {
          ops.push(this.client.put(this.endpointKey(spec.name, key)).value(JSON.stringify(ep)));
        }
      }
      return ops;
    }).then((r) => r as number);
  }

  patchEndpoints(
    name: string,
    upserts: readonly Endpoint[],
    removals: readonly string[],
    opts: { readonly ifRevision?: number } = {},
  ): Promise<number | undefined> {
    return this.guarded(name, opts.ifRevision, (current) => {
      if (!current) return undefined;
      const row: Row = { ...rowOf(current), op: 'patch' };
      const ops: Op[] = [this.client.put(this.serviceKey(name)).value(JSON.stringify(row))];
      const upserted = new Set<string>();
      for (const ep of upserts) {
        const key = endpointKey(ep);
        upserted.add(key);
        ops.push(this.client.put(this.endpointKey(name, key)).value(JSON.stringify(ep)));
      }
      for (const key of removals) {
        if (current.endpoints.has(key) && !upserted.has(key)) ops.push(this.client.delete().key(this.endpointKey(name, key)));
      }
      return ops;
    });
  }

  delete(name: string, opts: { readonly ifRevision?: number } = {}): Promise<number | undefined> {
    return this.guarded(name, opts.ifRevision, (current) => {
      if (!current) return undefined;
      return [
        this.client.delete().key(this.serviceKey(name)),
        this.client.delete().prefix(`${this.prefix}e/${name}/`),
      ];
    });
  }

  watch(fromRevision: number, handlers: WatchHandlers): () => void {
    const oldest = this.history[0]?.revision ?? this.revision + 1;
    if (fromRevision < this.revision && fromRevision + 1 < oldest) {
      throw new Error(`revision ${fromRevision} is older than the watch history (from ${oldest}); list again`);
    }
    const missed = this.history.filter((e) => e.revision > fromRevision);
    if (missed.length > 0) handlers.onEvents(missed);
    this.watchers.add(handlers);
    handlers.onHealth?.(this.healthy);
    return () => this.watchers.delete(handlers);
  }

  async close(): Promise<void> {
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
  ): Promise<number | undefined> {
    const run = this.queue.then(
      () => this.commitGuarded(name, ifRevision, build),
      () => this.commitGuarded(name, ifRevision, build),
    );
    this.queue = run.catch(() => {});
    return run;
  }

  private async commitGuarded(
    name: string,
    ifRevision: number | undefined,
    build: (current: HeldService | undefined) => Op[] | undefined,
  ): Promise<number | undefined> {
    for (let attempt = 1; ; attempt++) {
      const current = this.services.get(name);
      const seen = current?.revision ?? 0;
      if (ifRevision !== undefined && ifRevision !== seen) {
        // Our view may only be behind: read the truth before calling it a conflict.
        const actual = await this.readRevision(name);
        if (actual !== ifRevision) throw new StoreConflict(name, ifRevision, actual);
        await this.caughtUpTo(actual);
        continue;
      }
      const ops = build(current);
      if (ops === undefined) return undefined;
      const result = await this.client.if(this.serviceKey(name), 'Mod', '==', seen).then(...ops).commit();
      if (result.succeeded) {
        // Read-your-writes: the write is in this store's view before the caller hears of it.
        const revision = Number(result.header.revision);
        await this.caughtUpTo(revision);
        return revision;
      }
      if (attempt >= ATTEMPTS) {
        throw new StoreConflict(name, seen, await this.readRevision(name));
      }
      // Another replica wrote this service: wait until our watch has its write, then decide again.
      await this.caughtUpTo(Number(result.header.revision));
    }
  }

  private async readRevision(name: string): Promise<number> {
    const r = await this.client.get(this.serviceKey(name)).exec();
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
    const res = await this.client.getAll().prefix(this.prefix).exec();
    this.revision = Number(res.header.revision);
    const endpoints = new Map<string, Map<string, Endpoint>>();
    const rows: [string, Row, number][] = [];
    for (const kv of res.kvs) {
      const parsed = this.parseKey(kv.key.toString());
      if (parsed?.kind === 's') rows.push([parsed.name, JSON.parse(kv.value.toString()) as Row, Number(kv.mod_revision)]);
      else if (parsed?.kind === 'e') {
        let m = endpoints.get(parsed.name);
        if (!m) endpoints.set(parsed.name, (m = new Map()));
        m.set(parsed.key, JSON.parse(kv.value.toString()) as Endpoint);
      }
    }
    for (const [name, row, revision] of rows) {
      this.services.set(name, heldOf(row, revision, endpoints.get(name) ?? new Map()));
    }
  }

  private async follow(): Promise<void> {
    this.watcher = await this.client
      .watch()
      .prefix(this.prefix)
      .startRevision(String(this.revision + 1))
      .create();
    this.watcher.on('data', (res) => this.applyWatch(res));
    this.watcher.on('disconnected', () => this.setHealthy(false));
    this.watcher.on('connected', () => this.setHealthy(true));
    this.watcher.on('error', () => this.setHealthy(false));
  }

  private setHealthy(healthy: boolean): void {
    if (this.healthy === healthy) return;
    this.healthy = healthy;
    for (const w of this.watchers) w.onHealth?.(healthy);
  }

  /** One watch response → one StoreEvent per transaction (events of one revision). */
  private applyWatch(res: IWatchResponse): void {
    const byRevision = new Map<number, IWatchResponse['events']>();
    for (const e of res.events) {
      const rev = Number(e.kv.mod_revision);
      // A delete's kv carries the deletion revision as mod_revision.
      let list = byRevision.get(rev);
      if (!list) byRevision.set(rev, (list = []));
      list.push(e);
    }
    const events: StoreEvent[] = [];
    for (const [revision, txn] of [...byRevision].sort((a, b) => a[0] - b[0])) {
      if (revision <= this.revision) continue;
      events.push(...this.applyTransaction(revision, txn));
      this.revision = revision;
    }
    if (events.length === 0) return;
    this.history.push(...events);
    if (this.history.length > HISTORY) this.history.splice(0, this.history.length - HISTORY);
    for (const w of [...this.watchers]) w.onEvents(events);
  }

  private applyTransaction(revision: number, txn: IWatchResponse['events']): StoreEvent[] {
    const out: StoreEvent[] = [];
    const touched = new Map<string, { row?: Row; deleted: boolean; upserts: Endpoint[]; removals: string[] }>();
    const entry = (name: string) => {
      let t = touched.get(name);
      if (!t) touched.set(name, (t = { deleted: false, upserts: [], removals: [] }));
      return t;
    };
    for (const e of txn) {
      const parsed = this.parseKey(e.kv.key.toString());
      if (!parsed) continue;
      const t = entry(parsed.name);
      if (parsed.kind === 's') {
        if (e.type === 'Delete') t.deleted = true;
        else t.row = JSON.parse(e.kv.value.toString()) as Row;
      } else if (e.type === 'Delete') t.removals.push(parsed.key);
      else t.upserts.push(JSON.parse(e.kv.value.toString()) as Endpoint);
    }
    for (const [name, t] of touched) {
      const current = this.services.get(name);
      if (t.deleted) {
        if (this.services.delete(name)) out.push({ kind: 'delete', revision, name });
        continue;
      }
      if (!t.row) continue; // endpoint keys without their service row: not one of our transactions
      const endpoints = new Map(current?.endpoints ?? []);
      for (const key of t.removals) endpoints.delete(key);
      for (const ep of t.upserts) endpoints.set(endpointKey(ep), ep);
      const held = heldOf(t.row, revision, endpoints);
      this.services.set(name, held);
      if (t.row.op === 'patch' && current) {
        out.push({ kind: 'patch', revision, name, upserts: t.upserts, removals: t.removals });
      } else {
        out.push({ kind: 'put', revision, service: toStored(held) });
      }
    }
    return out;
  }

  private serviceKey(name: string): string {
    return `${this.prefix}s/${name}`;
  }

  private endpointKey(name: string, key: string): string {
    return `${this.prefix}e/${name}/${key}`;
  }

  private parseKey(key: string): { kind: 's'; name: string } | { kind: 'e'; name: string; key: string } | undefined {
    if (!key.startsWith(this.prefix)) return undefined;
    const rest = key.slice(this.prefix.length);
    if (rest.startsWith('s/')) return { kind: 's', name: rest.slice(2) };
    if (!rest.startsWith('e/')) return undefined;
    const slash = rest.indexOf('/', 2);
    return slash < 0 ? undefined : { kind: 'e', name: rest.slice(2, slash), key: rest.slice(slash + 1) };
  }
}

function heldOf(row: Row, revision: number, endpoints: Map<string, Endpoint>): HeldService {
  return {
    head: row.head,
    owner: row.owner,
    ...(row.fileDigest !== undefined ? { fileDigest: row.fileDigest } : {}),
    revision,
    endpoints,
  };
}

function rowOf(held: HeldService): Omit<Row, 'op'> {
  return { head: held.head, owner: held.owner, ...(held.fileDigest !== undefined ? { fileDigest: held.fileDigest } : {}) };
}
