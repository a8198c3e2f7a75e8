/**
 * The operations of the etcd store's writes (etcd-store.ts commits them in
 * one transaction guarded by the service's revision): a whole service, a
 * patch, and a batch of edits, each as the row and the buckets it rewrites.
 */
import type { Etcd3 } from 'etcd3';
import { endpointKey, type Endpoint, type ServiceSpec } from '../../domain/service.js';
import { bucketOf, splitIntoBuckets, touchedBuckets } from '../buckets.js';
import { BUCKETS, rowOf, type EtcdLayout, type Row } from './etcd-layout.js';
import type { HeldService } from '../held-service.js';
import { headOf, type EndpointEdit, type EndpointView, type PutOptions } from '../store.js';

export type Op = ReturnType<Etcd3['put']> | ReturnType<Etcd3['delete']>;

export interface PendingEdit {
  readonly edit: (current: EndpointView) => EndpointEdit;
  readonly resolve: (revision: number | undefined) => void;
  readonly reject: (err: unknown) => void;
  /** Why the edit was refused in the last attempt. */
  error?: unknown;
}

export class EtcdWrites {
  constructor(
    private readonly client: Etcd3,
    private readonly layout: EtcdLayout,
  ) {}

  /** A whole service: its row, its buckets, and the removal of buckets it no longer fills. */
  put(spec: ServiceSpec, opts: PutOptions, current: HeldService | undefined): Op[] {
    const endpoints = new Map(spec.endpoints.map((e) => [endpointKey(e), e]));
    const fileDigest = opts.keepFileDigest ? current?.fileDigest : opts.fileDigest;
    const row: Row = {
      head: headOf(spec),
      owner: opts.owner,
      ...(fileDigest !== undefined ? { fileDigest } : {}),
      op: 'put',
    };
    const ops: Op[] = [this.client.put(this.layout.serviceKey(spec.name)).value(JSON.stringify(row))];
    const before = current ? splitIntoBuckets(current.endpoints, BUCKETS) : [];
    splitIntoBuckets(endpoints, BUCKETS).forEach((list, b) => {
      if (list.length > 0) ops.push(this.client.put(this.layout.bucketKey(spec.name, b)).value(JSON.stringify(list)));
      else if ((before[b]?.length ?? 0) > 0) ops.push(this.client.delete().key(this.layout.bucketKey(spec.name, b)));
    });
    return ops;
  }

  /** The operations of a batch of edits applied in order to `current`; undefined when every edit was refused. */
  edits(current: HeldService, pending: PendingEdit[]): Op[] | undefined {
    const next = new Map(current.endpoints);
    let total: number | undefined;
    const touched = new Set<string>();
    let applied = 0;
    for (const p of pending) {
      p.error = undefined;
      try {
        const { upserts, removals } = p.edit({
          name: current.head.name,
          size: next.size,
          get: (key) => next.get(key),
          totalWeight: () => (total ??= [...next.values()].reduce((n, e) => n + e.weight, 0)),
        });
        for (const key of removals) {
          const held = next.get(key);
          if (!held) continue;
          if (total !== undefined) total -= held.weight;
          next.delete(key);
          touched.add(key);
        }
        for (const ep of upserts) {
          const key = endpointKey(ep);
          if (total !== undefined) total += ep.weight - (next.get(key)?.weight ?? 0);
          next.set(key, ep);
          touched.add(key);
        }
        applied++;
      } catch (err) {
        p.error = err;
      }
    }
    return applied === 0 ? undefined : this.buckets(current, next, touched);
  }

  patch(current: HeldService, { upserts, removals }: EndpointEdit): Op[] {
    const next = new Map(current.endpoints);
    for (const key of removals) next.delete(key);
    for (const ep of upserts) next.set(endpointKey(ep), ep);
    return this.buckets(current, next, [...removals, ...upserts.map((e) => endpointKey(e))]);
  }

  /** The service's row and the buckets of `touched` keys, as they are in `next`. */
  private buckets(current: HeldService, next: ReadonlyMap<string, Endpoint>, touched: Iterable<string>): Op[] {
    const name = current.head.name;
    const row: Row = { ...rowOf(current), op: 'patch' };
    const ops: Op[] = [this.client.put(this.layout.serviceKey(name)).value(JSON.stringify(row))];
    const lists = new Map<number, Endpoint[]>([...touchedBuckets(touched, BUCKETS)].map((b) => [b, []]));
    for (const [key, ep] of next) lists.get(bucketOf(key, BUCKETS))?.push(ep);
    for (const [b, list] of lists) {
      ops.push(
        list.length > 0
          ? this.client.put(this.layout.bucketKey(name, b)).value(JSON.stringify(list))
          : this.client.delete().key(this.layout.bucketKey(name, b)),
      );
    }
    return ops;
  }
}
