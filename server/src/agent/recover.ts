/**
 * A restarted agent's bookkeeping, rebuilt from the pinned maps: the maps are
 * the truth (the datapath kept serving from them), so the agent reads back
 * what the last one published and drops what it left half-written.
 */
import { LAYOUT, MAX_SCOPES, MODE, readNodeKey, readSvcKey, readSvcValue, readU64At, SCOPE_FIRST_DYNAMIC, u32Key, valueHash } from './abi.js';
import type { BpfAddon } from './bpf.js';
import type { Fds } from './map-writes.js';
import { FIXED_SCOPES, keyString, type AgentState } from './planner.js';

/**
 * Fills `state` (fresh) from the maps, and deletes node entries of no live
 * tree. Returns the scope slots the last agent assigned, by the hash of the
 * scope's name (names are not in the maps).
 */
export function recoverState(bpf: BpfAddon, fds: Fds, state: AgentState): Map<bigint, number> {
  const svcVal = Buffer.alloc(LAYOUT.canopy_svc.size);
  const live = new Map<number, { key: ReturnType<typeof readSvcKey>; value: ReturnType<typeof readSvcValue>; raw: Buffer }>();
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
        live.set(readSvcValue(svcVal).tree, { key: readSvcKey(k), value: readSvcValue(svcVal), raw: Buffer.from(svcVal) });
      }
      prev = k;
    }
  }
  // Node keys by tree; those of no live tree are leftovers of an interrupted apply.
  const byTree = new Map<number, Buffer[]>();
  const stale: Buffer[] = [];
  const nk = Buffer.alloc(LAYOUT.canopy_node_key.size);
  prev = null;
  while (bpf.mapNextKey(fds.nodes, prev, nk)) {
    const k = Buffer.from(nk);
    const tree = readNodeKey(k).tree;
    if (live.has(tree)) (byTree.get(tree) ?? byTree.set(tree, []).get(tree)!).push(k);
    else stale.push(k);
    prev = k;
  }
  for (const k of stale) bpf.mapDelete(fds.nodes, k);
  let maxTree = 0;
  for (const [tree, { key, value, raw }] of live) {
    // A network-first tree's merged layout follows its own endpoints in the same range.
    const range = { start: value.epBase, length: value.mode === MODE.networkFirst ? 2 * value.epCount : value.epCount };
    state.allocator.reserve(range);
    const keys = byTree.get(tree) ?? [];
    state.services.set(keyString(key), {
      name: '',
      key,
      tree,
      range,
      value: raw,
      slots: value.levelScope,
      nodeKeys: Buffer.concat(keys),
      nodeCount: keys.length,
      endpoints: value.epCount,
      hash: '',
    });
    state.nodesHeld += keys.length;
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
export function adoptRecoveredScopes(recovered: ReadonlyMap<bigint, number>, scopes: Map<string, number>, names: Iterable<string>): boolean {
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
