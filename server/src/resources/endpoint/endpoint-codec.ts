/**
 * The ClusterLoadAssignment encoder, assembled by hand from pre-encoded parts:
 * a CLA from each endpoint's cached LbEndpoint bytes, so re-encoding after one
 * endpoint changed encodes only that endpoint; and, for CLAs whose leaves are
 * localities, a rope over cached subtree parts that follows the tree. The
 * caches below are keyed by object identity (endpoints, tree nodes, groups),
 * so they are correct for any number of meshes and die with their keys.
 */
import type { Cla, ClaGroup, ClaSpan } from '../../domain/cla.js';
import type { TreeNode } from '../../domain/locality-tree.js';
import { combineDigests, fastDigest, flatten, type Bytes, type Rope } from '../../wire/rope.js';
import { fieldSize, utf8Bytes, varintFieldSize, WireWriter } from '../../wire/wire.js';
import { groupBody, policyField, runBody, type GroupBody } from './endpoint-parts.js';
import { CodedError } from '../../domain/errors.js';

export { clampedWeightCount, lbEndpointEncodeCount, localityWeight } from './endpoint-parts.js';

/** The whole `endpoints` field (tag, length, LocalityLbEndpoints with its priority) of a group object. */
const groupFieldCache = new WeakMap<ClaGroup, Uint8Array>();

function groupField(g: ClaGroup): Uint8Array {
  const hit = groupFieldCache.get(g);
  if (hit) return hit;
  const body = groupBody(g);
  const len = body.length + (g.priority > 0 ? varintFieldSize(5, g.priority) : 0);
  const w = new WireWriter(fieldSize(2, len)).open(2, len).raw(body);
  if (g.priority > 0) w.uint(5, g.priority);
  const out = w.finish();
  groupFieldCache.set(g, out);
  return out;
}

/**
 * A ClusterLoadAssignment as one contiguous buffer (tests, debug views, and
 * CLAs whose leaves are not localities). Each group's field is the group's
 * body plus its priority (protobuf fields may come in any order), and the
 * domain shares group objects per (tree leaf, priority).
 */
export function encodeCla(cla: Cla): Uint8Array {
  return cla.spans ? flatten(claRope(cla)) : encodeGroups(cla);
}

/**
 * A ClusterLoadAssignment as the server holds it. When its leaves are
 * localities (`spans`), a rope over cached subtree parts that follows the
 * tree: it stays valid across endpoint changes that leave the tree's shape
 * alone, and the response encoder copies its parts straight into each
 * DiscoveryResponse. Otherwise, contiguous bytes.
 */
export function encodeClaBytes(cla: Cla): Bytes {
  return cla.spans ? claRope(cla) : encodeGroups(cla);
}

function encodeGroups(cla: Cla): Uint8Array {
  const name = utf8Bytes(cla.clusterName);
  const parts = cla.groups.map(groupField);
  const policy = policyField(cla.overprovisioningFactor);
  let size = fieldSize(1, name.length) + policy.length;
  for (const p of parts) size += p.length;
  const w = new WireWriter(size).bytes(1, name);
  for (const p of parts) w.raw(p);
  return w.raw(policy).finish();
}

/**
 * The `endpoints` fields of every leaf under a node at one priority: a leaf's
 * field as three parts, an inner node's as references to its children's
 * ropes. Rebuilt only when the node's rev moves, which costs its children's
 * count, never their bytes.
 */
interface SubtreeRope extends Rope {
  /**
   * Copies the bytes, less the part of the child at index `skip` (-1: none). A whole inner node is copied
   * from its bytes in one piece, made on the first whole copy.
   */
  copyTo(dst: Uint8Array, at: number, skip?: number): number;
  /** Copies the bytes as they are held: from the one piece if it was made, else part by part; makes nothing. */
  copyHeld(dst: Uint8Array, at: number): number;
  /** Where `child` is among this node's children (-1 when it is not one). */
  indexOf(child: TreeNode): number;
  lengthWithout(i: number): number;
  digestWithout(i: number): number;
}

/** A leaf's `endpoints` field: tag and length, the group's body (shared by every priority), the priority field. */
class LeafRope implements SubtreeRope {
  readonly length: number;

  constructor(
    readonly head: Uint8Array,
    readonly body: Uint8Array,
    readonly prio: Uint8Array,
    /** The body's digest and the priority's. */
    readonly digest: number,
  ) {
    this.length = head.length + body.length + prio.length;
  }

  copyTo(dst: Uint8Array, at: number): number {
    // Head and priority are a few bytes: a loop costs less than a set() call.
    const head = this.head;
    for (let i = 0; i < head.length; i++) dst[at++] = head[i]!;
    const body = this.body;
    dst.set(body, at);
    at += body.length;
    const prio = this.prio;
    for (let i = 0; i < prio.length; i++) dst[at++] = prio[i]!;
    return at;
  }

  copyHeld(dst: Uint8Array, at: number): number {
    return this.copyTo(dst, at);
  }

  indexOf(): number {
    return -1;
  }

  lengthWithout(): number {
    return this.length;
  }

  digestWithout(): number {
    return this.digest;
  }
}

class NodeRope implements SubtreeRope {
  readonly length: number;
  private digestHeld: number | undefined;
  /** Digest of this rope less one child's part, by the child's index (built on first use). */
  private without: number[] | undefined;

  constructor(
    readonly kids: readonly TreeNode[],
    readonly parts: readonly SubtreeRope[],
  ) {
    let n = 0;
    for (let i = 0; i < parts.length; i++) n += parts[i]!.length;
    this.length = n;
  }

  /**
   * Every leaf's bytes under this node in one piece. A response is copied from a handful of these instead
   * of from each leaf's parts: with a thousand leaves, scattered over the heap, a 256 KB CLA cost about 10×
   * a copy of contiguous bytes once other work had taken them out of the caches. A node's ropes are rebuilt
   * when it changes, so this is never stale; it holds the bytes once more per node copied whole.
   */
  private flat: Uint8Array | undefined;

  copyTo(dst: Uint8Array, at: number, skip = -1): number {
    const parts = this.parts;
    if (skip >= 0) {
      for (let i = 0; i < parts.length; i++) if (i !== skip) at = parts[i]!.copyTo(dst, at, -1);
      return at;
    }
    if (!this.flat) {
      const flat = new Uint8Array(this.length);
      if (this.copyHeld(flat, 0) !== flat.length)
        throw new CodedError('CANOPY_BROKEN_INVARIANT', 'subtree rope size mismatch');
      this.flat = flat;
    }
    return this.copyHeld(dst, at);
  }

  copyHeld(dst: Uint8Array, at: number): number {
    const flat = this.flat;
    if (flat) {
      dst.set(flat, at);
      return at + flat.length;
    }
    const parts = this.parts;
    for (let i = 0; i < parts.length; i++) at = parts[i]!.copyHeld(dst, at);
    return at;
  }

  get digest(): number {
    this.digestHeld ??= combineDigests(this.parts.map((p) => p.digest));
    return this.digestHeld;
  }

  indexOf(child: TreeNode): number {
    return this.kids.indexOf(child);
  }

  lengthWithout(i: number): number {
    return i < 0 ? this.length : this.length - this.parts[i]!.length;
  }

  digestWithout(i: number): number {
    if (i < 0) return this.digest;
    const held = (this.without ??= []);
    let d = held[i];
    if (d === undefined) {
      const ds: number[] = [];
      for (let k = 0; k < this.parts.length; k++) if (k !== i) ds.push(this.parts[k]!.digest);
      held[i] = d = combineDigests(ds);
    }
    return d;
  }
}

const EMPTY = new Uint8Array();
const EMPTY_LEAF = new LeafRope(EMPTY, EMPTY, EMPTY, 0);
/** Tag and length of an `endpoints` field, per length (leaves of equal size share one). */
const fieldHeads = new Map<number, Uint8Array>();
/** The priority field of a LocalityLbEndpoints (none for 0), per priority. */
const priorityFields: Uint8Array[] = [];

/**
 * A leaf at one priority, without copying its group's body: the same field
 * `groupField` writes for `leafGroup(leaf, priority)` (tag, length, body,
 * priority), as three parts.
 */
function leafRope(body: GroupBody | undefined, priority: number): LeafRope {
  if (!body) return EMPTY_LEAF;
  const bytes = body.bytes;
  const prio = (priorityFields[priority] ??=
    priority > 0 ? new WireWriter(varintFieldSize(5, priority)).uint(5, priority).finish() : EMPTY);
  const len = bytes.length + prio.length;
  let head = fieldHeads.get(len);
  if (!head) fieldHeads.set(len, (head = new WireWriter(fieldSize(2, len) - len).open(2, len).finish()));
  body.digest ??= fastDigest(bytes);
  return new LeafRope(head, bytes, prio, combineDigests([body.digest, priority]));
}

/** The body a leaf's group has at every priority (undefined for a leaf without endpoints). */
function leafBody(leaf: TreeNode): GroupBody | undefined {
  const run = leaf.orderedEndpoints();
  const first = run[0];
  return first ? runBody(run, first.locality, leaf.leafWeight()) : undefined;
}

/** A node's ropes at its current rev: by priority, and (for a leaf) its body. */
interface HeldRopes {
  readonly rev: number;
  readonly byPriority: (SubtreeRope | undefined)[];
  body: GroupBody | undefined | null;
}

const subtreeRopes = new WeakMap<TreeNode, HeldRopes>();

function subtreeRope(node: TreeNode, priority: number, levels: number): SubtreeRope {
  let held = subtreeRopes.get(node);
  if (!held || held.rev !== node.rev) subtreeRopes.set(node, (held = { rev: node.rev, byPriority: [], body: null }));
  let rope = held.byPriority[priority];
  if (!rope) {
    if (node.depth === levels) {
      if (held.body === null) held.body = leafBody(node);
      rope = leafRope(held.body, priority);
    } else {
      const kids = node.orderedChildren();
      const parts: SubtreeRope[] = new Array<SubtreeRope>(kids.length);
      for (let i = 0; i < kids.length; i++) parts[i] = subtreeRope(kids[i]!, priority, levels);
      rope = new NodeRope(kids, parts);
    }
    held.byPriority[priority] = rope;
  }
  return rope;
}

/**
 * A CLA of subtree spans. It resolves its parts through the subtree cache on
 * every read, so it is always the CLA of the tree as it is now; its length and
 * digest are kept until one of its spans' nodes changes.
 */
/** Reused by every refresh (synchronous, never re-entered): one fewer allocation per CLA per change. */
const scratch: number[] = [];

class ClaRope implements Rope {
  /** The spans' node revs when `ropes`, length and digest were last computed; undefined before. */
  private stamp: number[] | undefined;
  private ropes: SubtreeRope[] = [];
  /** Per span, the index of its excluded child among the rope's parts (-1: none). */
  private skip: number[] = [];
  private lengthHeld = 0;
  private digestHeld = 0;
  private readonly fixedDigests: readonly [number, number];

  constructor(
    private readonly head: Uint8Array,
    private readonly spans: readonly ClaSpan[],
    private readonly levels: number,
    private readonly tail: Uint8Array,
  ) {
    this.fixedDigests = [fastDigest(head), fastDigest(tail)];
  }

  /** Brings ropes, length and digest up to the tree; only spans whose node moved are looked up again. */
  private refresh(): void {
    const spans = this.spans;
    let stamp = this.stamp;
    if (stamp) {
      let same = true;
      for (let i = 0; i < spans.length; i++) if (stamp[i] !== spans[i]!.node.rev) same = false;
      if (same) return;
    } else stamp = this.stamp = new Array<number>(spans.length).fill(-1);
    let n = this.head.length + this.tail.length;
    const digests = scratch;
    digests.length = 0;
    digests.push(this.fixedDigests[0]);
    for (let i = 0; i < spans.length; i++) {
      const s = spans[i]!;
      if (stamp[i] !== s.node.rev) {
        const sub = subtreeRope(s.node, s.priority, this.levels);
        this.ropes[i] = sub;
        this.skip[i] = s.exclude ? sub.indexOf(s.exclude) : -1;
        stamp[i] = s.node.rev;
      }
      const sub = this.ropes[i]!;
      const skip = this.skip[i]!;
      n += sub.lengthWithout(skip);
      digests.push(sub.digestWithout(skip));
    }
    digests.push(this.fixedDigests[1]);
    this.lengthHeld = n;
    this.digestHeld = combineDigests(digests);
  }

  get length(): number {
    this.refresh();
    return this.lengthHeld;
  }

  get digest(): number {
    this.refresh();
    return this.digestHeld;
  }

  copyTo(dst: Uint8Array, at: number): number {
    this.refresh();
    dst.set(this.head, at);
    at += this.head.length;
    for (let i = 0; i < this.spans.length; i++) at = this.ropes[i]!.copyTo(dst, at, this.skip[i]);
    dst.set(this.tail, at);
    return at + this.tail.length;
  }
}

function claRope(cla: Cla): ClaRope {
  const name = utf8Bytes(cla.clusterName);
  const head = new WireWriter(fieldSize(1, name.length)).bytes(1, name).finish();
  return new ClaRope(head, cla.spans ?? [], cla.levels ?? 0, policyField(cla.overprovisioningFactor));
}
