/**
 * A restarted agent's bookkeeping, rebuilt from the pinned maps: the maps are
 * the truth (the datapath kept serving from them), so the agent reads back
 * what the last one published and drops what it left half-written.
 */
import {
  LAYOUT,
  MAX_SCOPES,
  readNode,
  readNodeKey,
  readSlotRef,
  readSvcKey,
  readU64At,
  SCOPE_FIRST_DYNAMIC,
  u32Key,
  valueHash,
  type BucketValue,
} from './abi.js';
import { readSvcValue, SVC_LAYOUT } from './abi-svc.js';
import type { BpfAddon } from './bpf.js';
import type { Fds } from './map-writes.js';
import { FIXED_SCOPES, keyString, type AgentState } from './planner.js';
import type { Range } from './slot-allocator.js';

/**
 * Fills `state` (fresh) from the maps, and deletes node entries of no live
 * tree. Returns the scope slots the last agent assigned, by the hash of the
 * scope's name (names are not in the maps).
 */
export function recoverState(bpf: BpfAddon, fds: Fds, state: AgentState): Map<bigint, number> {
  const svcVal = Buffer.alloc(SVC_LAYOUT.canopy_svc.size);
  const live = new Map<
    number,
    { key: ReturnType<typeof readSvcKey>; value: ReturnType<typeof readSvcValue>; raw: Buffer }
  >();
  let prev: Buffer | null = null;
  for (const [fd, size] of [
    [fds.services, LAYOUT.canopy_svc_key.size],
    [fds.services6, LAYOUT.canopy_svc_key6.size],
  ] as const) {
    const svcKeyBuf = Buffer.alloc(size);
    prev = null;
    while (bpf.mapNextKey(fd, prev, svcKeyBuf)) {
      const k = Buffer.from(svcKeyBuf);
      if (bpf.mapLookup(fd, k, svcVal)) {
        live.set(readSvcValue(svcVal).tree, {
          key: readSvcKey(k),
          value: readSvcValue(svcVal),
          raw: Buffer.from(svcVal),
        });
      }
      prev = k;
    }
  }
  // Node keys (and the slots of their buckets) by tree; those of no live tree are leftovers of an interrupted apply.
  const byTree = new Map<number, { keys: Buffer[]; ranges: Range[] }>();
  const stale: Buffer[] = [];
  const nk = Buffer.alloc(LAYOUT.canopy_node_key.size);
  const nv = Buffer.alloc(LAYOUT.canopy_node.size);
  prev = null;
  while (bpf.mapNextKey(fds.nodes, prev, nk)) {
    const k = Buffer.from(nk);
    const tree = readNodeKey(k).tree;
    if (live.has(tree)) {
      const held = byTree.get(tree) ?? byTree.set(tree, { keys: [], ranges: [] }).get(tree)!;
      held.keys.push(k);
      if (bpf.mapLookup(fds.nodes, k, nv)) held.ranges.push(...bucketRanges(readNode(nv)));
    } else stale.push(k);
    prev = k;
  }
  for (const k of stale) bpf.mapDelete(fds.nodes, k);
  let maxTree = 0;
  for (const [tree, { key, value, raw }] of live) {
    const held = byTree.get(tree) ?? { keys: [], ranges: [] };
    const ranges = [...bucketRanges(value.root), ...held.ranges];
    // An IPv6 service's entries name the slots of its addresses.
    if (key.vip6) ranges.push(...addressSlots(bpf, fds.endpoints, value.root));
    // Reserved as one run where ranges touch (a range at a time, like release).
    for (const r of joined(ranges)) state.allocator.reserve(r);
    state.services.set(keyString(key), {
      name: '',
      key,
      tree,
      ranges,
      value: raw,
      slots: value.levelScope,
      nodeKeys: Buffer.concat(held.keys),
      nodeCount: held.keys.length,
      endpoints: value.root.count,
      hash: '',
    });
    state.nodesHeld += held.keys.length;
    maxTree = Math.max(maxTree, tree);
  }
  state.nextTree = maxTree + 1;
  // Scope slots: the fixed ones, then whatever the last agent assigned (by name hash).
  const slotHashes = new Map<bigint, number>();
  const v = Buffer.alloc(8);
  for (let slot = SCOPE_FIRST_DYNAMIC; slot < MAX_SCOPES; slot++) {
    if (bpf.mapLookup(fds.scopes, u32Key(slot), v)) {
      const h = readU64At(v);
      if (h !== 0n) slotHashes.set(h, slot);
    }
  }
  return slotHashes;
}

/**
 * Takes back the slots of recovered scopes by name into `scopes`; true when
 * one was taken (workload entries need rewriting then).
 */
export function adoptRecoveredScopes(
  recovered: ReadonlyMap<bigint, number>,
  scopes: Map<string, number>,
  names: Iterable<string>,
): boolean {
  let adopted = false;
  if (recovered.size === 0) return adopted;
  for (const scope of names) {
    if (FIXED_SCOPES.has(scope) || scopes.has(scope)) continue;
    const slot = recovered.get(valueHash(scope));
    if (slot === undefined || [...scopes.values()].includes(slot)) continue;
    scopes.set(scope, slot);
    adopted = true;
  }
  return adopted;
}

/** The slots a bucket's entries occupy (the part of a second segment beyond them is unknown: left free). */
function bucketRanges(b: BucketValue): Range[] {
  const out: Range[] = [{ start: b.base, length: Math.min(b.split, b.count) }];
  if (b.count > b.split) out.push({ start: b.base2, length: b.count - b.split });
  return out.filter((r) => r.length > 0);
}

function entrySlot(b: BucketValue, i: number): number {
  return i < b.split ? b.base + i : b.base2 + (i - b.split);
}

/** The address slots an IPv6 service's root entries name (every backend is in the root). */
function addressSlots(bpf: BpfAddon, fd: number, root: BucketValue): Range[] {
  const v = Buffer.alloc(LAYOUT.canopy_backend.size);
  const slots = new Set<number>();
  for (let i = 0; i < root.count; i++) {
    if (bpf.mapLookup(fd, u32Key(entrySlot(root, i)), v)) {
      const ref = readSlotRef(v);
      if (ref > 0) slots.add(ref - 1);
    }
  }
  return [...slots].map((start) => ({ start, length: 1 }));
}

function joined(ranges: readonly Range[]): Range[] {
  const out: Range[] = [];
  for (const r of [...ranges].sort((a, b) => a.start - b.start)) {
    const last = out[out.length - 1];
    if (last && last.start + last.length === r.start)
      out[out.length - 1] = { start: last.start, length: last.length + r.length };
    else out.push(r);
  }
  return out;
}
