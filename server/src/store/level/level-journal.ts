/**
 * The embedded default backend: LevelDB on local disk through classic-level.
 * Each group of writes (local-store.ts: the writes that arrived while the
 * previous group was syncing) is one atomic batch with `sync: true`, so a
 * write acknowledged to a client has reached the disk. LevelDB's lock makes the data directory
 * this process's alone: a second `canopy serve` on it fails to start.
 *
 * Endpoints are kept in up to 256 buckets per service (by a hash of the
 * endpoint key), one value each: a 100k-endpoint PUT is 257 batch operations
 * instead of 100k (LevelDB's per-operation cost dominated: ~6 s on the
 * reference machine), and a one-endpoint PATCH rewrites one bucket (1/256 of
 * the service). A small service gets fewer buckets (about 256 endpoints
 * each), so a file of 1,000 services × 100 endpoints is 1,000 bucket writes
 * rather than ~80,000; a service that grows by patches is re-bucketed once
 * its buckets average over twice that.
 *
 * Layout (keys are strings; service names cannot contain NUL):
 *   rev                        the store revision
 *   s NUL <name>               { head, owner, fileDigest?, revision, buckets? } (no buckets: 256)
 *   b NUL <name> NUL <bucket>  the bucket's endpoints (endpoint-rows.ts: format 2; a plain JSON list is format 1)
 *   x NUL <key>                Store.putState's values (the load-aware plan), written without a sync of their own
 *
 * Which keys each bucket holds is known from a service's endpoints and its
 * bucket count. It is worked out when the service is first patched, not at
 * load or at a whole rewrite (a restart on 100k endpoints spent ~55 ms on
 * it); a rewrite's commit splits the endpoints into their buckets in one pass.
 */
import type { ClassicLevel } from 'classic-level';
import { CheckFile, lossReport } from './level-check.js';
import { openDatabase, storeError } from './level-open.js';
import { localityInterner } from '../../domain/locality.js';
import type { Endpoint } from '../../domain/service.js';
import { endpointKey } from '../../domain/service.js';
import { bucketOf as bucketFor, splitIntoBuckets } from '../buckets.js';
import { decodeBucket, encodeBucket } from './endpoint-rows.js';
import { LoadedService, type HeldService, type Journal, type JournalBatch } from '../held-service.js';
import type { ServiceHead } from '../store.js';
import { CodedError } from '../../domain/errors.js';

type Row = { head: ServiceHead; owner: HeldService['owner']; fileDigest?: string; revision: number; buckets?: number };

const SEP = '\u0000';
const MAX_BUCKETS = 256;
/** Endpoints a bucket is sized for. */
const PER_BUCKET = 256;
const serviceKey = (name: string) => `s${SEP}${name}`;
const bucketKey = (name: string, bucket: number) => `b${SEP}${name}${SEP}${String(bucket).padStart(3, '0')}`;

const bucketOf = (key: string, buckets: number): number => bucketFor(key, buckets);

/** A power of two from 1 to 256: about PER_BUCKET endpoints a bucket. */
function bucketsFor(endpoints: number): number {
  let n = 1;
  while (n < MAX_BUCKETS && n * PER_BUCKET < endpoints) n *= 2;
  return n;
}

export interface LevelJournalOptions {
  /** Open even if writes were lost (level-check.ts); `onLoss` is told what. */
  readonly acceptLoss?: boolean;
  readonly onLoss?: (report: string) => void;
}

/** A service's buckets: the keys each holds, or only how many there are until a patch needs the keys. */
type Buckets = Set<string>[] | number;
const countOf = (b: Buckets | undefined): number => (b === undefined ? 0 : typeof b === 'number' ? b : b.length);

export class LevelJournal implements Journal {
  /** Which endpoint keys each service's buckets hold, so a patch rewrites only its buckets. */
  private readonly buckets = new Map<string, Buckets>();
  /** The revision of the last durable commit. */
  private committed = 0;
  /**
   * Set when a write failed: LevelDB's log may then end in a partial record
   * behind which later records would be dropped at the next open (an
   * acknowledged write lost), so the database is closed and opened again
   * (which starts a new log) before anything else is written.
   */
  private broken: Error | undefined;
  private reopening: Promise<void> | undefined;

  private constructor(
    private db: ClassicLevel<string, string>,
    private readonly dir: string,
    private readonly check: CheckFile,
    private readonly opts: LevelJournalOptions,
    readonly description: string,
  ) {}

  static async open(dir: string, opts: LevelJournalOptions = {}): Promise<LevelJournal> {
    const db = await openDatabase(dir);
    return new LevelJournal(db, dir, CheckFile.open(dir), opts, `level:${dir}`);
  }

  async load(): Promise<{ revision: number; services: HeldService[] }> {
    const rev = await this.db.get('rev');
    const revision = rev === undefined ? 0 : (JSON.parse(rev) as number);
    this.committed = revision;
    const rows = (await this.db.iterator({ gt: `s${SEP}`, lt: `s\u0001` }).all()).map(
      ([key, value]) => [key, JSON.parse(value) as Row] as const,
    );
    const endpoints = new Map<string, Endpoint[]>();
    for (const [, row] of rows) {
      endpoints.set(row.head.name, []);
      this.buckets.set(row.head.name, row.buckets ?? MAX_BUCKETS);
    }
    const intern = localityInterner();
    for (const [key, value] of await this.db.iterator({ gt: `b${SEP}`, lt: `b\u0001` }).all()) {
      const list = endpoints.get(key.slice(2, key.indexOf(SEP, 2)));
      if (list) decodeBucket(value, list, intern);
    }
    const services = rows.map(
      ([, row]) => new LoadedService(row.head, row.owner, row.fileDigest, row.revision, endpoints.get(row.head.name)!),
    );
    const found = { revision, services: services.length };
    const loss = lossReport(this.dir, this.check.expected, found);
    if (loss && !this.opts.acceptLoss) {
      await this.close();
      throw new CodedError(
        'CANOPY_STORE_FORMAT',
        `${loss}. Restore the directory from a backup, or start with --accept-store-loss to serve what was recovered`,
      );
    }
    if (loss) this.opts.onLoss?.(loss);
    this.check.record(found);
    return { revision, services };
  }

  begin(): JournalBatch {
    return new LevelBatch(this);
  }

  async getState(key: string): Promise<string | undefined> {
    await this.usable();
    return this.db.get(`x${SEP}${key}`);
  }

  /** Not synced: the next synced commit or probe carries it to the disk; a killed process loses nothing. */
  async putState(key: string, value: string): Promise<void> {
    await this.usable();
    try {
      await this.db.put(`x${SEP}${key}`, value);
    } catch (err) {
      throw await this.failed(err);
    }
  }

  async close(): Promise<void> {
    if (this.db.status === 'open') await this.db.close();
    this.check.close();
  }

  /**
   * Stages a whole service, sized for its endpoints: its row, its buckets, and
   * the removal of buckets it no longer fills.
   */
  stageRewrite(batch: LevelBatch, service: HeldService): void {
    const name = service.head.name;
    const n = bucketsFor(service.endpoints.size);
    const before = countOf(this.buckets.get(name));
    // Which keys each bucket holds is worked out by the commit (one pass) or a later patch.
    this.setBuckets(batch, name, n);
    for (let b = 0; b < Math.max(n, before); b++) batch.dirty(name, b);
    batch.row(service);
  }

  stagePatch(batch: LevelBatch, service: HeldService, upserts: readonly Endpoint[], removals: readonly string[]): void {
    const name = service.head.name;
    const held = this.buckets.get(name);
    if (held === undefined || bucketsFor(service.endpoints.size) >= 2 * countOf(held)) {
      // Grown past its buckets (or not known): rewritten whole, in more of them.
      this.stageRewrite(batch, service);
      return;
    }
    let current: Set<string>[];
    if (typeof held === 'number') {
      // Its keys as the service holds them now, this patch applied; a rollback forgets them again.
      current = keysByBucket(service, held);
      this.buckets.set(name, current);
      batch.onRollback(() => this.buckets.set(name, held));
    } else current = held;
    // Copies of the touched buckets only (once a batch), so the undo can put the old ones back.
    const bucket = (key: string): Set<string> => {
      const b = bucketOf(key, current.length);
      const old = current[b];
      if (old && batch.owned.has(old)) return old;
      const set = new Set(old);
      batch.owned.add(set);
      batch.onRollback(() => {
        if (old) current[b] = old;
      });
      current[b] = set;
      batch.dirty(name, b);
      return set;
    };
    for (const ep of upserts) bucket(endpointKey(ep)).add(endpointKey(ep));
    for (const key of removals) bucket(key).delete(key);
    batch.row(service);
  }

  stageDelete(batch: LevelBatch, name: string): void {
    const before = countOf(this.buckets.get(name));
    for (let b = 0; b < before; b++) batch.dirty(name, b);
    this.setBuckets(batch, name, undefined);
    batch.row(undefined, name);
  }

  private setBuckets(batch: LevelBatch, name: string, sets: Buckets | undefined): void {
    const before = this.buckets.get(name);
    batch.onRollback(() => {
      if (before !== undefined) this.buckets.set(name, before);
      else this.buckets.delete(name);
    });
    if (sets !== undefined) this.buckets.set(name, sets);
    else this.buckets.delete(name);
  }

  /**
   * Writes the staged keys as they are now (after every write of the batch)
   * in one synced LevelDB batch. A chained batch: for the tens of thousands of
   * operations of a large config, classic-level's array form spends about 5×
   * the CPU on each operation.
   */
  async commit(
    revision: number,
    rows: ReadonlyMap<string, HeldService | undefined>,
    dirty: ReadonlyMap<string, Set<number>>,
  ): Promise<void> {
    await this.usable();
    const batch = this.db.batch();
    batch.put('rev', String(revision));
    for (const [name, service] of rows) {
      if (service)
        batch.put(
          serviceKey(name),
          this.rowValue(service, this.buckets.has(name) ? countOf(this.buckets.get(name)) : MAX_BUCKETS),
        );
      else batch.del(serviceKey(name));
    }
    for (const [name, buckets] of dirty) {
      const service = rows.get(name);
      const held = this.buckets.get(name);
      // After a patch the keys of each bucket are known; after a rewrite the endpoints are split once here.
      const split = service && typeof held === 'number' ? splitIntoBuckets(service.endpoints, held) : undefined;
      for (const b of buckets) {
        const endpoints = split
          ? split[b]
          : service && typeof held === 'object'
            ? endpointsOf(service, held[b])
            : undefined;
        if (endpoints && endpoints.length > 0) batch.put(bucketKey(name, b), encodeBucket(endpoints));
        else batch.del(bucketKey(name, b));
      }
    }
    try {
      await batch.write({ sync: true });
    } catch (err) {
      throw await this.failed(err);
    }
    this.committed = revision;
    this.check.record({ revision, services: this.buckets.size });
  }

  /**
   * A durable write of what is already stored (the revision): how a store
   * whose writes failed learns that it can write again without waiting for a
   * client's write.
   */
  async probe(): Promise<void> {
    await this.usable();
    try {
      await this.db.put('rev', String(this.committed), { sync: true });
    } catch (err) {
      throw await this.failed(err);
    }
  }

  /** Reopens the database after a failed write (see `broken`). */
  private usable(): Promise<void> {
    if (!this.broken) return Promise.resolve();
    // One reopen at a time: a client's write and the store's probe may both ask.
    this.reopening ??= openDatabase(this.dir)
      .then(
        (db) => {
          this.db = db;
          this.broken = undefined;
        },
        (err: unknown) => {
          throw storeError(this.dir, err);
        },
      )
      .finally(() => {
        this.reopening = undefined;
      });
    return this.reopening;
  }

  private async failed(err: unknown): Promise<Error> {
    this.broken = err as Error;
    await this.db.close().catch(() => {});
    return storeError(this.dir, err);
  }

  private rowValue(s: HeldService, buckets: number): string {
    const row: Row = {
      head: s.head,
      owner: s.owner,
      ...(s.fileDigest !== undefined ? { fileDigest: s.fileDigest } : {}),
      revision: s.revision,
      ...(buckets !== MAX_BUCKETS ? { buckets } : {}),
    };
    return JSON.stringify(row);
  }
}

/**
 * The writes of one group commit. Staging records which keys changed (and
 * the journal's bucket bookkeeping, undone on rollback); the values are
 * serialised once, at commit, from the state after the group's last write:
 * 64 PATCHes of one bucket write it once.
 */
class LevelBatch implements JournalBatch {
  private readonly rows = new Map<string, HeldService | undefined>();
  private readonly dirtyBuckets = new Map<string, Set<number>>();
  /** Bucket sets copied in this batch: later patches of the batch change them in place. */
  readonly owned = new WeakSet<Set<string>>();
  private readonly undo: (() => void)[] = [];
  private revision = 0;
  size = 0;

  constructor(private readonly journal: LevelJournal) {}

  put(revision: number, service: HeldService): void {
    this.staged(revision);
    this.journal.stageRewrite(this, service);
  }

  patch(revision: number, service: HeldService, upserts: readonly Endpoint[], removals: readonly string[]): void {
    this.staged(revision);
    this.journal.stagePatch(this, service, upserts, removals);
  }

  delete(revision: number, name: string): void {
    this.staged(revision);
    this.journal.stageDelete(this, name);
  }

  commit(): Promise<void> {
    return this.journal.commit(this.revision, this.rows, this.dirtyBuckets);
  }

  rollback(): void {
    for (const u of this.undo.reverse()) u();
    this.undo.length = 0;
  }

  row(service: HeldService | undefined, name = service?.head.name ?? ''): void {
    this.rows.set(name, service);
  }

  dirty(name: string, bucket: number): void {
    let set = this.dirtyBuckets.get(name);
    if (!set) this.dirtyBuckets.set(name, (set = new Set()));
    set.add(bucket);
  }

  onRollback(undo: () => void): void {
    this.undo.push(undo);
  }

  private staged(revision: number): void {
    this.revision = revision;
    this.size++;
  }
}

/** The keys of `service`'s endpoints in each of `n` buckets. */
function keysByBucket(service: HeldService, n: number): Set<string>[] {
  const sets = Array.from({ length: n }, () => new Set<string>());
  for (const key of service.endpoints.keys()) sets[bucketOf(key, n)]?.add(key);
  return sets;
}

/** The endpoints of `keys` as the service holds them. */
function endpointsOf(service: HeldService, keys: ReadonlySet<string> | undefined): Endpoint[] {
  const held: Endpoint[] = [];
  for (const k of keys ?? []) {
    const ep = service.endpoints.get(k);
    if (ep) held.push(ep);
  }
  return held;
}
