/**
 * The embedded default backend: LevelDB on local disk through classic-level.
 * Each write is one atomic batch with `sync: true`, so a write acknowledged to
 * a client has reached the disk. LevelDB's lock makes the data directory
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
 *   b NUL <name> NUL <bucket>  the bucket's endpoints, a JSON list
 */
import { mkdirSync } from 'node:fs';
import { ClassicLevel } from 'classic-level';
import type { Endpoint } from '../domain/service.js';
import { endpointKey } from '../domain/service.js';
import { bucketOf as bucketFor } from './buckets.js';
import type { HeldService, Journal, JournalPut } from './local-store.js';
import type { ServiceHead } from './store.js';

type Row = { head: ServiceHead; owner: HeldService['owner']; fileDigest?: string; revision: number; buckets?: number };
type Op = { type: 'put'; key: string; value: string } | { type: 'del'; key: string };

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

export class LevelJournal implements Journal {
  /** Which endpoint keys each service's buckets hold, so a patch rewrites only its buckets. */
  private readonly buckets = new Map<string, Set<string>[]>();

  private constructor(
    private readonly db: ClassicLevel<string, string>,
    readonly description: string,
  ) {}

  static async open(dir: string): Promise<LevelJournal> {
    mkdirSync(dir, { recursive: true });
    // JSON is encoded here rather than by valueEncoding 'json', which was ~3× slower for large batches.
    const db = new ClassicLevel<string, string>(dir, { valueEncoding: 'utf8' });
    try {
      await db.open();
    } catch (err) {
      const cause = (err as { cause?: { code?: string } }).cause;
      if ((err as { code?: string }).code === 'LEVEL_LOCKED' || cause?.code === 'LEVEL_LOCKED') {
        throw new Error(`the data directory ${dir} is in use by another canopy process`);
      }
      throw err;
    }
    return new LevelJournal(db, `level:${dir}`);
  }

  async load(): Promise<{ revision: number; services: HeldService[] }> {
    const rev = await this.db.get('rev');
    const revision = rev === undefined ? 0 : (JSON.parse(rev) as number);
    const rows = (await this.db.iterator({ gt: `s${SEP}`, lt: `s\u0001` }).all()).map(
      ([key, value]) => [key, JSON.parse(value) as Row] as const,
    );
    const endpoints = new Map<string, Map<string, Endpoint>>();
    for (const [, row] of rows) {
      endpoints.set(row.head.name, new Map());
      this.buckets.set(row.head.name, emptyBuckets(row.buckets ?? MAX_BUCKETS));
    }
    for (const [key, value] of await this.db.iterator({ gt: `b${SEP}`, lt: `b\u0001` }).all()) {
      const name = key.slice(2, key.indexOf(SEP, 2));
      const map = endpoints.get(name);
      const sets = this.buckets.get(name);
      if (!map || !sets) continue;
      for (const ep of JSON.parse(value) as Endpoint[]) {
        const k = endpointKey(ep);
        map.set(k, ep);
        sets[bucketOf(k, sets.length)]?.add(k);
      }
    }
    const services = rows.map(([, value]) => {
      const { buckets: _, ...row } = value;
      return { ...row, endpoints: endpoints.get(row.head.name) ?? new Map<string, Endpoint>() };
    });
    return { revision, services };
  }

  put(revision: number, service: HeldService, removedKeys: readonly string[]): Promise<void> {
    return this.putMany([{ revision, service, removedKeys }]);
  }

  putMany(puts: readonly JournalPut[]): Promise<void> {
    const last = puts[puts.length - 1];
    if (!last) return Promise.resolve();
    const ops: Op[] = [this.revisionOp(last.revision)];
    const done = new Map<string, Set<string>[]>();
    for (const { service } of puts) done.set(service.head.name, this.rewriteOps(service, ops));
    return this.write(ops).then(() => {
      for (const [name, sets] of done) this.buckets.set(name, sets);
    });
  }

  /** Adds the ops that write the whole service, sized for its endpoints; returns its new buckets. */
  private rewriteOps(service: HeldService, ops: Op[]): Set<string>[] {
    const name = service.head.name;
    const sets = emptyBuckets(bucketsFor(service.endpoints.size));
    for (const key of service.endpoints.keys()) sets[bucketOf(key, sets.length)]?.add(key);
    const before = this.buckets.get(name) ?? [];
    ops.push(this.rowOp(service, sets.length));
    for (let b = 0; b < Math.max(sets.length, before.length); b++) {
      const keys = sets[b];
      if (keys && keys.size > 0) ops.push(this.bucketOp(service, b, keys));
      else if ((before[b]?.size ?? 0) > 0) ops.push({ type: 'del', key: bucketKey(name, b) });
    }
    return sets;
  }

  patch(revision: number, service: HeldService, upserts: readonly Endpoint[], removals: readonly string[]): Promise<void> {
    const name = service.head.name;
    const current = this.buckets.get(name) ?? emptyBuckets(MAX_BUCKETS);
    if (bucketsFor(service.endpoints.size) >= 2 * current.length) {
      // Grown past its buckets: rewritten whole, in more of them.
      const ops: Op[] = [this.revisionOp(revision)];
      const sets = this.rewriteOps(service, ops);
      return this.write(ops).then(() => {
        this.buckets.set(name, sets);
      });
    }
    // Copies of the touched buckets only; swapped in once the write is durable.
    const next = new Map<number, Set<string>>();
    const bucket = (key: string): Set<string> => {
      const b = bucketOf(key, current.length);
      let set = next.get(b);
      if (!set) next.set(b, (set = new Set(current[b])));
      return set;
    };
    for (const ep of upserts) bucket(endpointKey(ep)).add(endpointKey(ep));
    for (const key of removals) bucket(key).delete(key);
    const ops: Op[] = [this.revisionOp(revision), this.rowOp(service, current.length)];
    for (const [b, keys] of next) {
      ops.push(keys.size > 0 ? this.bucketOp(service, b, keys) : { type: 'del', key: bucketKey(name, b) });
    }
    return this.write(ops).then(() => {
      for (const [b, keys] of next) current[b] = keys;
      this.buckets.set(name, current);
    });
  }

  delete(revision: number, name: string, _endpointKeys: readonly string[]): Promise<void> {
    const ops: Op[] = [this.revisionOp(revision), { type: 'del', key: serviceKey(name) }];
    (this.buckets.get(name) ?? []).forEach((keys, b) => {
      if (keys.size > 0) ops.push({ type: 'del', key: bucketKey(name, b) });
    });
    return this.write(ops).then(() => {
      this.buckets.delete(name);
    });
  }

  close(): Promise<void> {
    return this.db.close();
  }

  private write(ops: Op[]): Promise<void> {
    // A chained batch: for the tens of thousands of operations of a large config, classic-level's
    // array form spends about 5× the CPU on each operation.
    const batch = this.db.batch();
    for (const op of ops) {
      if (op.type === 'put') batch.put(op.key, op.value);
      else batch.del(op.key);
    }
    return batch.write({ sync: true });
  }

  private bucketOp(service: HeldService, bucket: number, keys: ReadonlySet<string>): Op {
    const list: Endpoint[] = [];
    for (const k of keys) {
      const ep = service.endpoints.get(k);
      if (ep) list.push(ep);
    }
    return { type: 'put', key: bucketKey(service.head.name, bucket), value: JSON.stringify(list) };
  }

  private revisionOp(revision: number): Op {
    return { type: 'put', key: 'rev', value: String(revision) };
  }

  private rowOp(s: HeldService, buckets: number): Op {
    const row: Row = {
      head: s.head,
      owner: s.owner,
      ...(s.fileDigest !== undefined ? { fileDigest: s.fileDigest } : {}),
      revision: s.revision,
      ...(buckets !== MAX_BUCKETS ? { buckets } : {}),
    };
    return { type: 'put', key: serviceKey(s.head.name), value: JSON.stringify(row) };
  }
}

function emptyBuckets(n: number): Set<string>[] {
  return Array.from({ length: n }, () => new Set<string>());
}
