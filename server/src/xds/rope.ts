/**
 * Bytes held as shared parts. A ClusterLoadAssignment of a 100k-endpoint
 * service is megabytes, and every one of its distinct versions shares almost
 * all of them with the others: as a rope it is a handful of references to
 * cached subtree parts, the response encoder copies those parts straight into
 * each DiscoveryResponse, and no CLA is ever flattened on its own. One
 * endpoint change then costs the parts on that endpoint's path, not a copy of
 * every CLA.
 */
import { createHash } from 'node:crypto';

export interface Rope {
  readonly length: number;
  /** Copies the bytes into `dst` from `at`; returns the offset after them. */
  copyTo(dst: Uint8Array, at: number): number;
  /** Equal for equal content built from the same parts. */
  readonly digest: string;
}

/** What a resource's encoding may be: one contiguous buffer, or a rope. */
export type Bytes = Uint8Array | Rope;

export function isRope(b: Bytes): b is Rope {
  return !(b instanceof Uint8Array);
}

export function copyBytes(b: Bytes, dst: Uint8Array, at: number): number {
  if (b instanceof Uint8Array) {
    dst.set(b, at);
    return at + b.length;
  }
  return b.copyTo(dst, at);
}

/** One contiguous copy (tests, debug views, and the rare consumer that needs one). */
export function flatten(b: Bytes): Uint8Array {
  if (b instanceof Uint8Array) return b;
  const out = new Uint8Array(b.length);
  const end = b.copyTo(out, 0);
  if (end !== out.length) throw new Error(`rope size mismatch: copied ${end} of ${out.length}`);
  return out;
}

/** A content digest of contiguous bytes: SHA-256, 96 bits, base64url. */
export function bytesDigest(b: Uint8Array): string {
  return createHash('sha256').update(b).digest('base64url').slice(0, 16);
}

/**
 * The digest of a sequence of digests (a rope's parts). Not cryptographic:
 * two independent 32-bit FNV-1a lanes over the parts' digests, which are
 * themselves SHA-256 at the leaves. It runs in JS without a hash object, so a
 * thousand CLAs can be re-versioned in well under a millisecond.
 */
export function combineDigests(parts: readonly string[]): string {
  let a = 0x811c9dc5;
  let b = 0x01000193 ^ parts.length;
  for (const p of parts) {
    for (let i = 0; i < p.length; i++) {
      const c = p.charCodeAt(i);
      a = Math.imul(a ^ c, 0x01000193);
      b = Math.imul(b ^ c, 0x5bd1e995);
      b ^= b >>> 15;
    }
    // A separator, so ["ab","c"] and ["a","bc"] differ.
    a = Math.imul(a ^ 0xff, 0x01000193);
    b = Math.imul(b ^ 0xff, 0x5bd1e995);
  }
  return (a >>> 0).toString(36).padStart(7, '0') + (b >>> 0).toString(36).padStart(7, '0');
}
