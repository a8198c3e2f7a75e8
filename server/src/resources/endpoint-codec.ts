/**
 * The ClusterLoadAssignment encoder, assembled by hand from pre-encoded parts:
 * a CLA from each endpoint's cached LbEndpoint bytes, so re-encoding after one
 * endpoint changed encodes only that endpoint; and, for CLAs whose leaves are
 * localities, a rope over cached subtree parts that follows the tree. The
 * caches below are keyed by object identity (endpoints, tree nodes, groups),
 * so they are correct for any number of meshes and die with their keys.
 */
import { leafGroup, type Cla, type ClaGroup, type ClaSpan } from '../domain/cla.js';
import type { TreeNode } from '../domain/locality-tree.js';
import type { Locality } from '../domain/locality.js';
import type { Endpoint } from '../domain/service.js';
import { combineDigests, fastDigest, flatten, type Bytes, type Rope } from '../wire/rope.js';
import { fieldSize, optionalFieldSize, utf8Bytes, varintFieldSize, WireWriter } from '../wire/wire.js';

const lbEndpointCache = new WeakMap<Endpoint, Uint8Array>();
let lbEndpointEncodings = 0;

/** How many LbEndpoints were encoded so far (tests check that unchanged ones are reused). */
export function lbEndpointEncodeCount(): number {
  return lbEndpointEncodings;
}

/** The whole `lb_endpoints` field (tag, length, LbEndpoint) of one endpoint, cached per Endpoint object. */
function lbEndpointField(ep: Endpoint): Uint8Array {
  const hit = lbEndpointCache.get(ep);
  if (hit) return hit;
  lbEndpointEncodings++;
  const addr = utf8Bytes(ep.address);
  const socket = fieldSize(2, addr.length) + varintFieldSize(3, ep.port);
  const address = fieldSize(1, socket);
  const endpoint = fieldSize(1, address);
  const weight = ep.weight === 1 ? 0 : fieldSize(4, varintFieldSize(1, ep.weight));
  const body = fieldSize(1, endpoint) + weight;
  const w = new WireWriter(fieldSize(2, body))
    .open(2, body)
    .open(1, endpoint)
    .open(1, address)
    .open(1, socket)
    .bytes(2, addr)
    .uint(3, ep.port);
  if (weight) w.open(4, varintFieldSize(1, ep.weight)).uint(1, ep.weight);
  const out = w.finish();
  lbEndpointCache.set(ep, out);
  return out;
}

const runCache = new WeakMap<readonly Endpoint[], Uint8Array>();

/** The lb_endpoints fields of one tree leaf, concatenated once per version of that leaf. */
function runField(run: readonly Endpoint[]): Uint8Array {
  const hit = runCache.get(run);
  if (hit) return hit;
  const parts = run.map(lbEndpointField);
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  runCache.set(run, out);
  return out;
}

interface GroupBody {
  /** LocalityLbEndpoints less its priority: locality, lb_endpoints, load_balancing_weight. */
  readonly bytes: Uint8Array;
  readonly weight: number;
}

const UINT32_MAX = 0xffff_ffff;
let clampedWeights = 0;

/** How many locality weights were over uint32 and sent as its maximum (a decoder would wrap them). */
export function clampedWeightCount(): number {
  return clampedWeights;
}

/**
 * load_balancing_weight is a uint32: a bigger sum would be truncated by every
 * decoder (4,295 endpoints of weight 1,000,000 would arrive as 32,704). Config
 * validation keeps a service's total within uint32; this is the last guard,
 * for a sum reached another way (endpoint PATCHes): clamp, never wrap.
 */
export function localityWeight(sum: number): number {
  if (sum <= UINT32_MAX) return sum;
  clampedWeights++;
  return UINT32_MAX;
}

/** A one-leaf group's body, encoded once per version of that leaf (keyed by its endpoint array). */
const leafBodyCache = new WeakMap<readonly Endpoint[], GroupBody>();

function groupBody(g: ClaGroup): Uint8Array {
  const single = g.runs?.length === 1 ? g.runs[0] : undefined;
  if (single) {
    const hit = leafBodyCache.get(single);
    if (hit && hit.weight === g.weight) return hit.bytes;
  }
  const { region, zone, subzone } = localityBytes(g.locality);
  const locality = optionalFieldSize(1, region.length) + optionalFieldSize(2, zone.length) + optionalFieldSize(3, subzone.length);
  // One leaf: its endpoints' fields go straight into the body (no per-leaf concatenation to copy again).
  const endpoints = single || !g.runs ? g.endpoints.map(lbEndpointField) : g.runs.map(runField);
  const weight = localityWeight(g.weight);
  let size = fieldSize(1, locality) + fieldSize(3, varintFieldSize(1, weight));
  for (const e of endpoints) size += e.length;
  const w = new WireWriter(size).open(1, locality);
  w.optionalBytes(1, region).optionalBytes(2, zone).optionalBytes(3, subzone);
  for (const e of endpoints) w.raw(e);
  w.open(3, varintFieldSize(1, weight)).uint(1, weight);
  const bytes = w.finish();
  if (single) leafBodyCache.set(single, { bytes, weight: g.weight });
  return bytes;
}

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

function policyField(overprovisioningFactor: number): Uint8Array {
  const policy = varintFieldSize(1, overprovisioningFactor);
  return new WireWriter(fieldSize(4, fieldSize(3, policy)))
    .open(4, fieldSize(3, policy))
    .open(3, policy)
    .uint(1, overprovisioningFactor)
    .finish();
}

/**
 * The `endpoints` fields of every leaf under a node at one priority, as
 * references to its children's parts: rebuilt only when the node's rev moves,
 * which costs its children's count, never their bytes.
 */
class SubtreeRope implements Rope {
  readonly length: number;
  private digestHeld: number | undefined;
  /** Digest of this rope less one child's part, by the child's index (built on first use). */
  private without: number[] | undefined;

  constructor(
    /**
     * A leaf's `endpoints` field as three parts: tag and length, the group's
     * body (shared by every priority), the priority field. Undefined for an
     * inner node.
     */
    readonly leaf: readonly [Uint8Array, Uint8Array, Uint8Array] | undefined,
    /** A leaf's digest: its body's and its priority's. */
    private readonly leafDigest: number,
    readonly kids: readonly TreeNode[],
    readonly parts: readonly SubtreeRope[],
  ) {
    let n = leaf ? leaf[0].length + leaf[1].length + leaf[2].length : 0;
    for (const p of parts) n += p.length;
    this.length = n;
  }

  /** Copies the parts, less the one at index `skip` (-1: none). */
  copyTo(dst: Uint8Array, at: number, skip = -1): number {
    const leaf = this.leaf;
    if (leaf) {
      dst.set(leaf[0], at);
      at += leaf[0].length;
      dst.set(leaf[1], at);
      at += leaf[1].length;
      dst.set(leaf[2], at);
      return at + leaf[2].length;
    }
    for (let i = 0; i < this.parts.length; i++) if (i !== skip) at = this.parts[i]!.copyTo(dst, at);
    return at;
  }

  get digest(): number {
    this.digestHeld ??= this.leaf ? this.leafDigest : combineDigests(this.parts.map((p) => p.digest));
    return this.digestHeld;
  }

  /** Where `child` is among this node's children (-1 when it is not one). */
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
/** Tag and length of an `endpoints` field, per length (leaves of equal size share one). */
const fieldHeads = new Map<number, Uint8Array>();
/** The priority field of a LocalityLbEndpoints (none for 0), per priority. */
const priorityFields: Uint8Array[] = [];

/**
 * A leaf at one priority, without copying its group's body: the same field
 * `groupField` writes (tag, length, body, priority), as three parts.
 */
function leafRope(leaf: TreeNode, priority: number): SubtreeRope {
  const g = leafGroup(leaf, priority);
  if (!g) return new SubtreeRope([EMPTY, EMPTY, EMPTY], 0, [], []);
  const body = groupBody(g);
  const prio = (priorityFields[priority] ??=
    priority > 0 ? new WireWriter(varintFieldSize(5, priority)).uint(5, priority).finish() : EMPTY);
  const len = body.length + prio.length;
  let head = fieldHeads.get(len);
  if (!head) fieldHeads.set(len, (head = new WireWriter(fieldSize(2, len) - len).open(2, len).finish()));
  return new SubtreeRope([head, body, prio], combineDigests([leafDigest(body), priority]), [], []);
}

const leafDigests = new WeakMap<Uint8Array, number>();

function leafDigest(b: Uint8Array): number {
  let d = leafDigests.get(b);
  if (d === undefined) leafDigests.set(b, (d = fastDigest(b)));
  return d;
}

/** node → (rev, priority → its rope). */
const subtreeRopes = new WeakMap<TreeNode, { rev: number; byPriority: (SubtreeRope | undefined)[] }>();

function subtreeRope(node: TreeNode, priority: number, levels: number): SubtreeRope {
  let held = subtreeRopes.get(node);
  if (!held || held.rev !== node.rev) subtreeRopes.set(node, (held = { rev: node.rev, byPriority: [] }));
  let rope = held.byPriority[priority];
  if (!rope) {
    if (node.depth === levels) rope = leafRope(node, priority);
    else {
      const kids = node.orderedChildren();
      rope = new SubtreeRope(
        undefined,
        0,
        kids,
        kids.map((c) => subtreeRope(c, priority, levels)),
      );
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
    this.fixedDigests = [leafDigest(head), leafDigest(tail)];
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

const localityCache = new WeakMap<Locality, { region: Uint8Array; zone: Uint8Array; subzone: Uint8Array }>();

/** UTF-8 of a locality's names, cached per Locality object (shared by an endpoint's every CLA). */
function localityBytes(l: Locality): { region: Uint8Array; zone: Uint8Array; subzone: Uint8Array } {
  let hit = localityCache.get(l);
  if (!hit) {
    hit = { region: utf8Bytes(l.region), zone: utf8Bytes(l.zone), subzone: utf8Bytes(l.subzone) };
    localityCache.set(l, hit);
  }
  return hit;
}
