/**
 * The agent's side of a SotW response: every tree resource, every version.
 * The server sends an unchanged service's tree as the very same bytes, so a
 * resource whose bytes equal one of the last version's is not decoded nor
 * hashed again: its decoded tree and hash are reused. A version then costs
 * decoding the trees that changed plus one byte comparison of the others
 * (memcmp speed, ~0.1 ms per MB), not a decode and a hash of every tree
 * (~1 ms per 1,000 endpoints).
 */
import { contentHash } from '../resources/resource.js';
import { tryDecodeLocalityTree } from '../resources/tree-codec.js';
import { TREE_TYPE } from '../resources/type-urls.js';
import type { IncomingTree } from './planner.js';

export interface InboxResource {
  readonly typeUrl: string;
  readonly value: Uint8Array;
}

export interface Received {
  readonly trees: IncomingTree[];
  /** Services whose resource did not decode: they keep what they have. */
  readonly keep: Set<string>;
  /** One per resource that could not be taken, with its index. */
  readonly errors: string[];
  /** Resources decoded in this version (new or changed bytes). */
  readonly decoded: number;
  /** Resources whose bytes equal the last version's: not decoded again. */
  readonly reused: number;
}

interface Known {
  readonly bytes: Uint8Array;
  readonly tree: IncomingTree;
}

export class TreeInbox {
  /** The last version's decoded resources, by byte length (a cheap first filter before comparing bytes). */
  private known = new Map<number, Known[]>();

  receive(resources: readonly InboxResource[]): Received {
    const trees: IncomingTree[] = [];
    const keep = new Set<string>();
    const errors: string[] = [];
    const next = new Map<number, Known[]>();
    let decoded = 0;
    let reused = 0;
    resources.forEach((r, i) => {
      if (r.typeUrl !== TREE_TYPE) {
        errors.push(`resources[${i}]: type_url ${r.typeUrl} is not ${TREE_TYPE}`);
        return;
      }
      let k = this.known.get(r.value.length)?.find((c) => Buffer.compare(c.bytes, r.value) === 0);
      if (k) {
        reused++;
      } else {
        const d = tryDecodeLocalityTree(r.value);
        decoded++;
        if (!d.ok) {
          if (d.service) keep.add(d.service);
          errors.push(`resources[${i}]: ${d.error}`);
          return;
        }
        // A copy: the response's buffer is not kept alive by the one tree that changed in it.
        k = { bytes: Buffer.from(r.value), tree: { tree: d.tree, hash: contentHash(r.value) } };
      }
      trees.push(k.tree);
      const same = next.get(r.value.length);
      if (same) same.push(k);
      else next.set(r.value.length, [k]);
    });
    this.known = next;
    return { trees, keep, errors, decoded, reused };
  }
}
