/**
 * How the etcd store lays services out under its key prefix, and how one
 * watched transaction (or a fresh read after a gap in the watch) becomes store
 * events (see etcd-store.ts).
 *
 *   <prefix>s/<name>          { head, owner, fileDigest?, op: 'put' | 'patch' }
 *   <prefix>b/<name>/<nn>     one of 64 buckets of endpoints (buckets.ts), a JSON list
 */
import type { Etcd3, IWatchResponse } from 'etcd3';
import { endpointKey, sameEndpoint, type Endpoint } from '../../domain/service.js';
import { bucketOf } from '../buckets.js';
import { toStored, type HeldService } from '../held-service.js';
import type { ServiceHead, StoreEvent } from '../store.js';

export type Row = { head: ServiceHead; owner: HeldService['owner']; fileDigest?: string; op: 'put' | 'patch' };

export const BUCKETS = 64;

export class EtcdLayout {
  constructor(readonly prefix: string) {}

  serviceKey(name: string): string {
    return `${this.prefix}s/${name}`;
  }

  bucketKey(name: string, bucket: number): string {
    return `${this.prefix}b/${name}/${String(bucket).padStart(2, '0')}`;
  }

  parseKey(key: string): { kind: 's'; name: string } | { kind: 'b'; name: string; bucket: number } | undefined {
    if (!key.startsWith(this.prefix)) return undefined;
    const rest = key.slice(this.prefix.length);
    if (rest.startsWith('s/')) return { kind: 's', name: rest.slice(2) };
    if (!rest.startsWith('b/')) return undefined;
    const slash = rest.indexOf('/', 2);
    const bucket = Number(rest.slice(slash + 1));
    return slash < 0 || !Number.isInteger(bucket) ? undefined : { kind: 'b', name: rest.slice(2, slash), bucket };
  }
}

/** A watch response's events grouped by the transaction (revision) that made them, oldest first. */
export function transactionsOf(res: IWatchResponse): [number, IWatchResponse['events']][] {
  const byRevision = new Map<number, IWatchResponse['events']>();
  for (const e of res.events) {
    const rev = Number(e.kv.mod_revision);
    // A delete's kv carries the deletion revision as mod_revision.
    let list = byRevision.get(rev);
    if (!list) byRevision.set(rev, (list = []));
    list.push(e);
  }
  return [...byRevision].sort((a, b) => a[0] - b[0]);
}

/** After a gap in the watch: what changed from the services `held` to those a fresh read found, as events. */
export function resyncEvents(
  held: ReadonlyMap<string, HeldService>,
  fresh: ReadonlyMap<string, HeldService>,
  revision: number,
): StoreEvent[] {
  const events: StoreEvent[] = [];
  for (const name of held.keys()) {
    if (!fresh.has(name)) events.push({ kind: 'delete', revision, name });
  }
  for (const [name, service] of fresh) {
    if (held.get(name)?.revision !== service.revision) {
      events.push({ kind: 'put', revision, service: toStored(service) });
    }
  }
  return events;
}

export function applyTransaction(
  services: Map<string, HeldService>,
  layout: EtcdLayout,
  revision: number,
  txn: IWatchResponse['events'],
): StoreEvent[] {
  const out: StoreEvent[] = [];
  const touched = new Map<string, { row?: Row; deleted: boolean; buckets: Map<number, Endpoint[]> }>();
  for (const e of txn) {
    const parsed = layout.parseKey(e.kv.key.toString());
    if (!parsed) continue;
    let t = touched.get(parsed.name);
    if (!t) touched.set(parsed.name, (t = { deleted: false, buckets: new Map() }));
    if (parsed.kind === 's') {
      if (e.type === 'Delete') t.deleted = true;
      else t.row = JSON.parse(e.kv.value.toString()) as Row;
    } else {
      t.buckets.set(parsed.bucket, e.type === 'Delete' ? [] : (JSON.parse(e.kv.value.toString()) as Endpoint[]));
    }
  }
  for (const [name, t] of touched) {
    const current = services.get(name);
    if (t.deleted) {
      if (services.delete(name)) out.push({ kind: 'delete', revision, name });
      continue;
    }
    if (!t.row) continue; // bucket keys without their service row: not one of our transactions
    // A bucket's new list replaces what the bucket held: the difference is the change.
    const endpoints = new Map(current?.endpoints ?? []);
    const upserts: Endpoint[] = [];
    const removals: string[] = [];
    const fresh =
      t.row.op === 'put' ? new Set(Array.from({ length: BUCKETS }, (_, b) => b)) : new Set(t.buckets.keys());
    const held = new Map<number, Set<string>>();
    for (const key of endpoints.keys()) {
      const b = bucketOf(key, BUCKETS);
      if (fresh.has(b)) (held.get(b) ?? held.set(b, new Set()).get(b)!).add(key);
    }
    for (const b of fresh) {
      const list = t.buckets.get(b) ?? [];
      const stay = new Set<string>();
      for (const ep of list) {
        const key = endpointKey(ep);
        stay.add(key);
        const old = endpoints.get(key);
        if (!old || !sameEndpoint(old, ep)) {
          endpoints.set(key, ep);
          upserts.push(ep);
        }
      }
      for (const key of held.get(b) ?? []) {
        if (!stay.has(key)) {
          endpoints.delete(key);
          removals.push(key);
        }
      }
    }
    const next = heldOf(t.row, revision, endpoints);
    services.set(name, next);
    if (t.row.op === 'patch' && current) out.push({ kind: 'patch', revision, name, upserts, removals });
    else out.push({ kind: 'put', revision, service: toStored(next) });
  }
  return out;
}

export function heldOf(row: Row, revision: number, endpoints: Map<string, Endpoint>): HeldService {
  return {
    head: row.head,
    owner: row.owner,
    ...(row.fileDigest !== undefined ? { fileDigest: row.fileDigest } : {}),
    revision,
    endpoints,
  };
}

export function rowOf(held: HeldService): Omit<Row, 'op'> {
  return {
    head: held.head,
    owner: held.owner,
    ...(held.fileDigest !== undefined ? { fileDigest: held.fileDigest } : {}),
  };
}

/** Everything under the layout's prefix, at one revision. */
export async function readAll(
  client: Etcd3,
  layout: EtcdLayout,
): Promise<{ revision: number; services: Map<string, HeldService> }> {
  const res = await client.getAll().prefix(layout.prefix).exec();
  const endpoints = new Map<string, Map<string, Endpoint>>();
  const rows: [string, Row, number][] = [];
  for (const kv of res.kvs) {
    const parsed = layout.parseKey(kv.key.toString());
    if (parsed?.kind === 's') rows.push([parsed.name, JSON.parse(kv.value.toString()) as Row, Number(kv.mod_revision)]);
    else if (parsed?.kind === 'b') {
      let m = endpoints.get(parsed.name);
      if (!m) endpoints.set(parsed.name, (m = new Map()));
      for (const ep of JSON.parse(kv.value.toString()) as Endpoint[]) m.set(endpointKey(ep), ep);
    }
  }
  const services = new Map<string, HeldService>();
  for (const [name, row, revision] of rows) services.set(name, heldOf(row, revision, endpoints.get(name) ?? new Map()));
  return { revision: Number(res.header.revision), services };
}
