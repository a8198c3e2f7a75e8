/**
 * Bytes held as shared parts. A ClusterLoadAssignment of a 100k-endpoint
 * service is megabytes, and every one of its distinct versions shares almost
 * all of them with the others: as a rope it is a handful of references to
 * cached subtree parts, the response encoder copies those parts straight into
 * each DiscoveryResponse, and no CLA is ever flattened on its own. One
 * endpoint change then costs the parts on that endpoint's path, not a copy of
 * every CLA.
 */
import { CodedError } from '../domain/errors.js';
export interface Rope {
  readonly length: number;
  /** Copies the bytes into `dst` from `at`; returns the offset after them. */
  copyTo(dst: Uint8Array, at: number): number;
  /** Equal for equal content built from the same parts (53 bits). */
  readonly digest: number;
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
  // Every byte is written below (and checked): no zero-fill.
  const out = Buffer.allocUnsafeSlow(b.length);
  const end = b.copyTo(out, 0);
  if (end !== out.length)
    throw new CodedError('CANOPY_BROKEN_INVARIANT', `rope size mismatch: copied ${end} of ${out.length}`);
  return out;
}

/**
 * A 53-bit digest of contiguous bytes in JS, for the many small parts of a
 * CLA (a tree leaf's group): two multiply-xor lanes over the bytes. Not
 * cryptographic; a version only has to change when content does.
 */
export function fastDigest(b: Uint8Array): number {
  let a = 0x811c9dc5 ^ b.length;
  let c = 0x5bd1e995;
  for (let i = 0; i < b.length; i++) {
    const x = b[i] as number;
    a = Math.imul(a ^ x, 0x01000193);
    c = Math.imul(c ^ x, 0x5bd1e995);
    c ^= c >>> 15;
  }
  return (c & 0x1fffff) * 4294967296 + (a >>> 0);
}

/**
 * The digest of a sequence of digests (a rope's parts), as 53 bits. Not
 * cryptographic: two 32-bit multiply-xor lanes over the parts' digests.
 * Numbers, not strings, so that re-versioning a thousand CLAs after a change
 * costs microseconds.
 */
export function combineDigests(parts: readonly number[]): number {
  let a = 0x811c9dc5 ^ parts.length;
  let b = 0x5bd1e995;
  for (let i = 0; i < parts.length; i++) {
    const d = parts[i] as number;
    const lo = d >>> 0;
    const hi = Math.floor(d / 4294967296) >>> 0;
    a = Math.imul(a ^ lo, 0x01000193);
    a = Math.imul(a ^ hi, 0x01000193);
    b = Math.imul(b ^ lo, 0x5bd1e995);
    b ^= b >>> 13;
    b = Math.imul(b ^ hi, 0x5bd1e995);
    b ^= b >>> 15;
  }
  return (b & 0x1fffff) * 4294967296 + (a >>> 0);
}
