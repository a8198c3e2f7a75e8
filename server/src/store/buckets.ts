/**
 * Endpoints are stored in a fixed number of buckets per service, chosen by a
 * hash of the endpoint key, one stored value per bucket: a large PUT is a few
 * hundred writes instead of one per endpoint (per-write cost dominates in
 * LevelDB and etcd alike), and a one-endpoint PATCH rewrites one bucket.
 */
import type { Endpoint } from '../domain/service.js';

/** FNV-1a over the key's UTF-16 units: stable across runs, processes and replicas. */
export function bucketOf(key: string, buckets: number): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193);
  return (h >>> 0) % buckets;
}

/** The endpoints of `endpoints` that fall in each bucket. */
export function splitIntoBuckets(endpoints: ReadonlyMap<string, Endpoint>, buckets: number): Endpoint[][] {
  const out: Endpoint[][] = Array.from({ length: buckets }, () => []);
  for (const [key, ep] of endpoints) out[bucketOf(key, buckets)]?.push(ep);
  return out;
}

/** The buckets a set of changed keys falls in. */
export function touchedBuckets(keys: Iterable<string>, buckets: number): Set<number> {
  const out = new Set<number>();
  for (const k of keys) out.add(bucketOf(k, buckets));
  return out;
}
