/**
 * The TypeScript mirror of struct canopy_svc (bpf/canopy_abi.h), the value
 * of canopy_services and canopy_services6: the tree id, mode and levels, the
 * root's bucket, and the node's own deepest bucket (`here`). Checked by
 * server/test/bpf-abi.test.ts with the rest of the header.
 */
import { LAYOUT, LE, readBucket, readU32, u32, writeBucket, type BucketValue } from './abi.js';

export const SVC_LAYOUT = {
  canopy_svc: {
    size: 60,
    fields: { tree: 0, mode: 4, depth: 5, flags: 6, level_scope: 8, root: 16, here_level: 36, here: 40 },
  },
} as const;

/** The node's own locality projected: its deepest node with backends (level >= 1) and that node's bucket. */
export interface HereValue {
  readonly level: number;
  readonly bucket: BucketValue;
}

export interface SvcValue {
  readonly tree: number;
  readonly mode: number;
  readonly depth: number;
  readonly levelScope: readonly number[];
  /** SVC_WEIGHTED: pick by weight. */
  readonly flags?: number;
  /** Every endpoint of the service. */
  readonly root: BucketValue;
  /** None: a connect with the node's locality walks the tree. */
  readonly here?: HereValue;
}

export function svcValue(v: SvcValue): Buffer {
  const f = SVC_LAYOUT.canopy_svc.fields;
  const b = Buffer.alloc(SVC_LAYOUT.canopy_svc.size);
  u32(b, f.tree, v.tree);
  b.writeUInt8(v.mode, f.mode);
  b.writeUInt8(v.depth, f.depth);
  if (LE) b.writeUInt16LE(v.flags ?? 0, f.flags);
  else b.writeUInt16BE(v.flags ?? 0, f.flags);
  v.levelScope.forEach((s, i) => b.writeUInt8(s, f.level_scope + i));
  writeBucket(b, f.root, v.root);
  if (v.here) {
    u32(b, f.here_level, v.here.level);
    writeBucket(b, f.here, v.here.bucket);
  }
  return b;
}

export function readSvcValue(b: Buffer): SvcValue {
  const f = SVC_LAYOUT.canopy_svc.fields;
  const depth = b.readUInt8(f.depth);
  const level = readU32(b, f.here_level);
  return {
    tree: readU32(b, f.tree),
    mode: b.readUInt8(f.mode),
    depth,
    levelScope: Array.from({ length: depth }, (_, i) => b.readUInt8(f.level_scope + i)),
    flags: LE ? b.readUInt16LE(f.flags) : b.readUInt16BE(f.flags),
    root: readBucket(b, f.root),
    ...(level > 0 ? { here: { level, bucket: readBucket(b, f.here) } } : {}),
  };
}

/** The same value without the projection (a connect with the node's locality then walks). */
export function withoutHere(value: Buffer): Buffer {
  const b = Buffer.from(value);
  b.fill(0, SVC_LAYOUT.canopy_svc.fields.here_level, SVC_LAYOUT.canopy_svc.fields.here + LAYOUT.canopy_bucket.size);
  return b;
}
