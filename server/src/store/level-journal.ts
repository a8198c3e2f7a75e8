/**
 * The embedded default backend: LevelDB on local disk through classic-level.
 * Each write is one atomic batch with `sync: true`, so a write acknowledged to
 * a client has reached the disk. LevelDB's lock makes the data directory
 * this process's alone: a second `canopy serve` on it fails to start.
 *
 * Layout (keys are strings; service names cannot contain NUL):
 *   rev                      the store revision
 *   s NUL <name>             { head, owner, fileDigest?, revision }
 *   e NUL <name> NUL <key>   an endpoint
 */
import { mkdirSync } from 'node:fs';
import { ClassicLevel } from 'classic-level';
import type { Endpoint } from '../domain/service.js';
import { endpointKey } from '../domain/service.js';
import type { HeldService, Journal } from './local-store.js';
import type { ServiceHead } from './store.js';

type Row = { head: ServiceHead; owner: HeldService['owner']; fileDigest?: string; revision: number };
type Op = { type: 'put'; key: string; value: unknown } | { type: 'del'; key: string };

const SEP = '\u0000';
const serviceKey = (name: string) => `s${SEP}${name}`;
const endpointPrefix = (name: string) => `e${SEP}${name}${SEP}`;

export class LevelJournal implements Journal {
  private constructor(
    private readonly db: ClassicLevel<string, unknown>,
    readonly description: string,
  ) {}

  static async open(dir: string): Promise<LevelJournal> {
    mkdirSync(dir, { recursive: true });
    const db = new ClassicLevel<string, unknown>(dir, { valueEncoding: 'json' });
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
    const revision = ((await this.db.get('rev')) as number | undefined) ?? 0;
    const rows = await this.db.iterator({ gt: `s${SEP}`, lt: `s\u0001` }).all();
    const endpoints = new Map<string, Map<string, Endpoint>>();
    for (const [, row] of rows) endpoints.set((row as Row).head.name, new Map());
    // Keys sort by service, so one pass fills each service's map in order.
    const iterator = this.db.iterator({ gt: `e${SEP}`, lt: `e\u0001` });
    try {
      for (;;) {
        const batch = await iterator.nextv(4096);
        if (batch.length === 0) break;
        for (const [key, value] of batch) {
          const name = key.slice(2, key.indexOf(SEP, 2));
          const ep = value as Endpoint;
          endpoints.get(name)?.set(endpointKey(ep), ep);
        }
      }
    } finally {
      await iterator.close();
    }
    const services = rows.map(([, value]) => {
      const row = value as Row;
      return { ...row, endpoints: endpoints.get(row.head.name) ?? new Map<string, Endpoint>() };
    });
    return { revision, services };
  }

  put(revision: number, service: HeldService, removedKeys: readonly string[]): Promise<void> {
    const name = service.head.name;
    const ops: Op[] = [this.revisionOp(revision), this.rowOp(service)];
    for (const key of removedKeys) ops.push({ type: 'del', key: endpointPrefix(name) + key });
    for (const [key, ep] of service.endpoints) ops.push({ type: 'put', key: endpointPrefix(name) + key, value: ep });
    return this.write(ops);
  }

  patch(revision: number, service: HeldService, upserts: readonly Endpoint[], removals: readonly string[]): Promise<void> {
    const name = service.head.name;
    const ops: Op[] = [this.revisionOp(revision), this.rowOp(service)];
    for (const ep of upserts) ops.push({ type: 'put', key: endpointPrefix(name) + endpointKey(ep), value: ep });
    for (const key of removals) ops.push({ type: 'del', key: endpointPrefix(name) + key });
    return this.write(ops);
  }

  delete(revision: number, name: string, endpointKeys: readonly string[]): Promise<void> {
    const ops: Op[] = [this.revisionOp(revision), { type: 'del', key: serviceKey(name) }];
    for (const key of endpointKeys) ops.push({ type: 'del', key: endpointPrefix(name) + key });
    return this.write(ops);
  }

  close(): Promise<void> {
    return this.db.close();
  }

  private write(ops: Op[]): Promise<void> {
    return this.db.batch(ops, { sync: true });
  }

  private revisionOp(revision: number): Op {
    return { type: 'put', key: 'rev', value: revision };
  }

  private rowOp(s: HeldService): Op {
    const row: Row = {
      head: s.head,
      owner: s.owner,
      ...(s.fileDigest !== undefined ? { fileDigest: s.fileDigest } : {}),
      revision: s.revision,
    };
    return { type: 'put', key: serviceKey(s.head.name), value: row };
  }
}
