/**
 * A resource as the server holds it: encoded once as a google.protobuf.Any,
 * versioned by a hash of those bytes. Every stream that is sent it writes the
 * same bytes.
 */
import { createHash } from 'node:crypto';
import { anyRope, encodeAny } from '../wire/envelope.js';
import { isRope, type Bytes } from '../wire/rope.js';

export interface Resource {
  readonly name: string;
  /**
   * The encoded google.protobuf.Any that goes into DiscoveryResponse.resources:
   * contiguous, or a rope that follows the tree (a CLA), read when sent.
   */
  readonly any: Bytes;
  /**
   * Content hash of `any`: equal bytes, equal hash. For a rope, its 53-bit
   * digest as of the moment it is read (a number: no string per CLA per change).
   */
  readonly hash: string | number;
}

export function contentHash(...parts: readonly (Uint8Array | string)[]): string {
  const h = createHash('sha256');
  for (const p of parts) h.update(p);
  return h.digest('base64url').slice(0, 16);
}

export function makeResource(name: string, typeUrl: string, message: Bytes): Resource {
  if (isRope(message)) {
    const any = anyRope(typeUrl, message);
    return {
      name,
      any,
      get hash() {
        return any.digest;
      },
    };
  }
  const any = encodeAny(typeUrl, message);
  return { name, any, hash: contentHash(any) };
}

/** The version of a set of resources: a hash of its (name, hash) pairs. */
export function versionOf(resources: ReadonlyMap<string, Resource>): string {
  const names = [...resources.keys()].sort();
  const key = names.map((n) => `${n}=${resources.get(n)?.hash ?? ''}`).join('\n');
  // Many streams hold the same resources: hash each set once.
  let v = versions.get(key);
  if (v === undefined) {
    if (versions.size >= 4096) versions.clear();
    versions.set(key, (v = contentHash(key)));
  }
  return v;
}

const versions = new Map<string, string>();

/**
 * A resource's version as a string: its content hash, the same one SotW
 * versions are made of, so it is equal on every replica and in both protocols.
 */
export function versionText(hash: string | number): string {
  return typeof hash === 'string' ? hash : hash.toString(36);
}

/** Per resource, the text of its version as of its current hash (a rope's digest moves with the tree). */
const texts = new WeakMap<Resource, { hash: number; text: string }>();

/**
 * A resource's version (versionText of its hash), made once per resource and
 * content: every delta stream that holds it keeps the same string, instead of
 * formatting a digest per stream per response.
 */
export function resourceVersion(r: Resource): string {
  const hash = r.hash;
  if (typeof hash === 'string') return hash;
  const held = texts.get(r);
  if (held === undefined) {
    const text = hash.toString(36);
    texts.set(r, { hash, text });
    return text;
  }
  if (held.hash !== hash) {
    held.hash = hash;
    held.text = hash.toString(36);
  }
  return held.text;
}
