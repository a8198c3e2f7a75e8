/**
 * The node's own locality projected into each service value (canopy_svc.here):
 * the deepest node on the node's path that has backends, as the kernel's walk
 * would find it for a caller with the node's locality (canopy_nodeloc), so
 * such a connect needs no canopy_nodes lookup. The value must follow every
 * change along that path: the layout's edits and full layouts compute it with
 * the node's placement, and a change of the node's placement re-projects
 * every service (reproject). Pure.
 */
import { scopeValue, type Placement, type Scope } from '../domain/locality.js';
import { MODE, pathHash, valueHash } from './abi.js';
import { readSvcValue, svcValue, withoutHere, type HereValue } from './abi-svc.js';
import { bucketValue, type Bucket } from './bucket.js';

/** What the projection reads of a service's layout. */
export interface HereSource {
  readonly mode: number;
  /** The tree's scope per level. */
  readonly scopes: readonly string[];
  /** By `${level}:${path hash}` (placement.ts). */
  readonly nodes: ReadonlyMap<string, { readonly bucket: Bucket }>;
}

/** The deepest node with backends on `node`'s path (the primary tree only), or none. */
export function hereOf(l: HereSource, node: Placement | undefined): HereValue | undefined {
  if (!node || l.mode === MODE.random || l.scopes.length === 0) return undefined;
  const ids: string[] = [];
  let h = 0n;
  l.scopes.forEach((scope, i) => {
    h = pathHash(h, valueHash(scopeValue(scope as Scope, node)));
    ids.push(`${i + 1}:${h}`);
  });
  for (let i = ids.length - 1; i >= 0; i--) {
    const n = l.nodes.get(ids[i]!);
    if (n && n.bucket.count > 0) return { level: i + 1, bucket: bucketValue(n.bucket) };
  }
  return undefined;
}

/** Two placements give the same locality values (so the same projections). */
export function samePlacement(a: Placement | undefined, b: Placement | undefined): boolean {
  return JSON.stringify(a ?? null) === JSON.stringify(b ?? null);
}

export interface ServiceRewrite {
  readonly key: Buffer;
  readonly value: Buffer;
  readonly previous: Buffer;
}

/**
 * Each service's value with the projection of `node`: from its layout, or
 * without a projection where the layout is not known (after a restart; its
 * connects walk until its next version).
 */
export function reproject(
  services: Iterable<{ readonly key: Buffer; readonly value: Buffer; readonly layout?: HereSource | undefined }>,
  node: Placement | undefined,
): ServiceRewrite[] {
  const out: ServiceRewrite[] = [];
  for (const s of services) {
    const here = s.layout ? hereOf(s.layout, node) : undefined;
    const { here: _had, ...rest } = readSvcValue(s.value);
    const value = here ? svcValue({ ...rest, here }) : withoutHere(s.value);
    if (!value.equals(s.value)) out.push({ key: s.key, value, previous: s.value });
  }
  return out;
}
