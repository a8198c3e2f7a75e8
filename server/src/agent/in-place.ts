/**
 * O(change) republish: a new version of a service tree whose shape (scopes,
 * mode, node set) is unchanged is written into the slots the service already
 * has, one endpoint slot per changed backend, with no new tree id and no
 * service write. Pure: the planner decides, the Datapath writes.
 *
 * Why a connect never sees a half-written tree: this path writes endpoint
 * slots only, and a connect of an unweighted service reads exactly one
 * endpoint slot (the node entries it walks do not change). Whatever it reads
 * is that slot before or after the write, so what it picks belongs to the old
 * version or to the new one. Weighted services read several slots (the binary
 * search) and always take the full path.
 *
 * Every node keeps its slot count, so a removed backend's slot is not freed:
 * it becomes a filler, a copy of a live backend of the same node (a node's
 * possible picks are then exactly its new backends). An added backend takes a
 * filler slot of its node. When a node would have no filler left to take, no
 * live backend, or more than one filler in FILLER_SHARE of its slots (fillers
 * skew the split towards the duplicated backends), the tree goes the full way,
 * which lays it out afresh without fillers. Memory stays one layout per
 * service between versions (two for one grace period after a full write).
 */
import type { TreeMessage } from '../resources/tree-codec.js';

/** At most one filler per this many slots of a node. */
export const FILLER_SHARE = 8;

/** What the agent remembers of a service's endpoint slots. */
export interface Layout {
  readonly shape: string;
  /** The last version's backends grouped by the node they sit in directly (ip * 65536 + port), and each node's start in it. */
  readonly groupKeys: Float64Array;
  readonly groupStart: Int32Array;
  /** Per slot (relative to the service's ep_base): the backend it holds, the node owning it, whether it is a filler. */
  readonly slotKeys: Float64Array;
  readonly slotOwner: Int32Array;
  readonly filler: Uint8Array;
  /** Each node's slot range at the full write: start at 2i, end at 2i + 1. */
  readonly nodeRange: Int32Array;
}

/** Slot writes of an in-place version, relative to ep_base. */
export interface SlotWrites {
  readonly slots: readonly number[];
  readonly keys: readonly number[];
  /** What the slots held (for a rollback). */
  readonly previous: readonly number[];
}

export function backendKey(ip: number, port: number): number {
  return ip * 65536 + port;
}

export function keyIp(key: number): number {
  return Math.floor(key / 65536);
}

export function keyPort(key: number): number {
  return key % 65536;
}

/** Everything that must be equal for a version to be written in place. */
export function shapeOf(t: TreeMessage): string {
  const parts = [t.mode, String(t.networkFirst), t.scopes.join('\u0000')];
  for (const n of t.nodes) parts.push(`${n.parent}\u0001${n.value}`);
  return parts.join('\u0002');
}

/** The node each backend sits in directly: the deepest whose range holds it (parents come before children). */
function owners(t: TreeMessage): Int32Array {
  const owner = new Int32Array(t.backends.length);
  for (let i = 1; i < t.nodes.length; i++) {
    const n = t.nodes[i]!;
    owner.fill(i, n.start, n.end);
  }
  return owner;
}

function grouped(t: TreeMessage, owner: Int32Array): { keys: Float64Array; start: Int32Array } {
  const nodes = t.nodes.length;
  const n = owner.length;
  const start = new Int32Array(nodes + 1);
  for (let i = 0; i < n; i++) start[owner[i]! + 1]!++;
  for (let i = 0; i < nodes; i++) start[i + 1]! += start[i]!;
  const at = start.slice(0, nodes);
  const keys = new Float64Array(n);
  const backends = t.backends;
  for (let i = 0; i < n; i++) {
    const b = backends[i]!;
    keys[at[owner[i]!]!++] = b.ipv4 * 65536 + b.port;
  }
  return { keys, start };
}

/** Nodes whose own backends differ between two grouped versions of the same shape. */
function changedNodes(nodes: number, keys: Float64Array, start: Int32Array, oldKeys: Float64Array, oldStart: Int32Array): number[] {
  const out: number[] = [];
  for (let o = 0; o < nodes; o++) {
    const ns = start[o]!;
    const len = start[o + 1]! - ns;
    const os = oldStart[o]!;
    if (len !== oldStart[o + 1]! - os) {
      out.push(o);
      continue;
    }
    for (let i = 0; i < len; i++) {
      if (keys[ns + i] !== oldKeys[os + i]) {
        out.push(o);
        break;
      }
    }
  }
  return out;
}

/** The layout of a tree written the full way (slot i holds backend i). */
export function fullLayout(t: TreeMessage): Layout {
  const owner = owners(t);
  const g = grouped(t, owner);
  const slotKeys = new Float64Array(t.backends.length);
  t.backends.forEach((b, i) => {
    slotKeys[i] = backendKey(b.ipv4, b.port);
  });
  const nodeRange = new Int32Array(2 * t.nodes.length);
  t.nodes.forEach((n, i) => {
    nodeRange[2 * i] = n.start;
    nodeRange[2 * i + 1] = n.end;
  });
  return { shape: shapeOf(t), groupKeys: g.keys, groupStart: g.start, slotKeys, slotOwner: owner, filler: new Uint8Array(t.backends.length), nodeRange };
}

/**
 * The slot writes that turn `layout` into `t`, and the layout after them; a
 * string says why `t` must be written the full way instead.
 */
export function inPlace(layout: Layout, t: TreeMessage): { writes: SlotWrites; layout: Layout } | string {
  if (shapeOf(t) !== layout.shape) return 'the node set changed';
  const g = grouped(t, owners(t));
  const slots: number[] = [];
  const keys: number[] = [];
  const previous: number[] = [];
  let slotKeys: Float64Array | undefined;
  let filler: Uint8Array | undefined;
  for (const o of changedNodes(t.nodes.length, g.keys, g.start, layout.groupKeys, layout.groupStart)) {
    const ns = g.start[o]!;
    const ne = g.start[o + 1]!;
    // This node's backends changed: match its slots to the new backends.
    const wanted = new Map<number, number>();
    for (let i = ns; i < ne; i++) wanted.set(g.keys[i]!, (wanted.get(g.keys[i]!) ?? 0) + 1);
    const live = new Set(wanted.keys());
    if (live.size === 0) return `nodes[${o}] has no backend left`;
    const mine: number[] = [];
    const free: number[] = [];
    for (let s = layout.nodeRange[2 * o]!; s < layout.nodeRange[2 * o + 1]!; s++) {
      if (layout.slotOwner[s] !== o) continue;
      mine.push(s);
      const k = layout.slotKeys[s]!;
      const left = layout.filler[s] ? 0 : (wanted.get(k) ?? 0);
      if (left > 0) wanted.set(k, left - 1);
      else free.push(s);
    }
    slotKeys ??= layout.slotKeys.slice();
    filler ??= layout.filler.slice();
    const put = (s: number, k: number) => {
      slots.push(s);
      keys.push(k);
      previous.push(slotKeys![s]!);
      slotKeys![s] = k;
    };
    for (const [k, count] of wanted) {
      for (let c = 0; c < count; c++) {
        const s = free.pop();
        if (s === undefined) return `nodes[${o}] has no free slot for a new backend`;
        put(s, k);
        filler[s] = 0;
      }
    }
    if (free.length * FILLER_SHARE > mine.length) return `nodes[${o}] would have ${free.length} fillers in ${mine.length} slots`;
    const liveList = [...live];
    free.forEach((s, i) => {
      filler![s] = 1;
      if (!live.has(slotKeys![s]!)) put(s, liveList[i % liveList.length]!);
    });
  }
  return {
    writes: { slots, keys, previous },
    layout: { ...layout, groupKeys: g.keys, groupStart: g.start, slotKeys: slotKeys ?? layout.slotKeys, filler: filler ?? layout.filler },
  };
}
