/**
 * Plans how a set of locality trees becomes BPF map operations, without
 * touching the kernel. Pure: the Datapath executes the plan.
 *
 * For every service whose tree changed:
 * 1. fill: a fresh endpoint range and a fresh tree id, written in batches;
 * 2. publish: one write of the service entry, which switches connect() from
 *    the old tree to the new one in a single step;
 * 3. retire: the old range and node entries, freed one grace period later,
 *    once no connect() that read the old service entry can still be using them.
 * A removed service is unpublished (one delete) and retired the same way.
 */
import type { TreeMessage } from '../resources/tree-codec.js';
import {
  LAYOUT,
  MAX_DEPTH,
  MAX_SCOPES,
  MODE,
  SCOPE_FIRST_DYNAMIC,
  SCOPE_REGION,
  SCOPE_SUBZONE,
  SCOPE_ZONE,
  svcKey,
  svcValue,
  valueHash,
  writeBackend,
  writeNode,
  writeNodeKey,
  writeSlot,
  type SvcKey,
} from './abi.js';
import type { Range, SlotAllocator } from './slot-allocator.js';

export const FIXED_SCOPES: ReadonlyMap<string, number> = new Map([
  ['region', SCOPE_REGION],
  ['zone', SCOPE_ZONE],
  ['subzone', SCOPE_SUBZONE],
]);

/** One service as it is in the maps. */
export interface Published {
  readonly name: string;
  readonly key: SvcKey;
  readonly tree: number;
  readonly range: Range;
  /** Its node keys, concatenated (for the batch delete when it is retired). */
  readonly nodeKeys: Buffer;
  readonly nodeCount: number;
  /** Content hash of the tree it was loaded from ('' after a restart: unknown). */
  readonly hash: string;
}

export interface AgentState {
  /** by `vip:port` */
  readonly services: Map<string, Published>;
  allocator: SlotAllocator;
  nextTree: number;
  /** scope name → slot */
  readonly scopes: Map<string, number>;
}

export interface IncomingTree {
  readonly tree: TreeMessage;
  /** Content hash of the resource; equal hash, nothing to do. */
  readonly hash: string;
}

export interface Fill {
  readonly service: string;
  readonly endpoints: { readonly keys: Buffer; readonly values: Buffer; readonly count: number };
  readonly nodes: { readonly keys: Buffer; readonly values: Buffer; readonly count: number };
}

export interface Plan {
  /** New scope slots (canopy_scopes) — workload entries must be rewritten before anything is published. */
  readonly newScopes: readonly { readonly scope: string; readonly slot: number }[];
  readonly fills: readonly Fill[];
  readonly publish: readonly { readonly service: string; readonly key: Buffer; readonly value: Buffer }[];
  readonly unpublish: readonly { readonly service: string; readonly key: Buffer }[];
  /** Freed after the grace period. */
  readonly retire: readonly Published[];
  /** The state once the plan has been executed. */
  readonly next: AgentState;
  /** Services left as they were. */
  readonly unchanged: number;
}

export class PlanError extends Error {}

export function keyString(k: SvcKey): string {
  return `${k.vip}:${k.port}`;
}

export function scopeSlots(state: AgentState): ReadonlyMap<string, number> {
  return state.scopes;
}

/**
 * Plans the move from `state` to exactly `trees` (full state: a service not
 * in `trees` is removed). Throws PlanError, naming the service and field,
 * when the set cannot be loaded; `state` is never modified.
 */
export function plan(state: AgentState, trees: readonly IncomingTree[]): Plan {
  const allocator = state.allocator.clone();
  const scopes = new Map(state.scopes);
  const newScopes: { scope: string; slot: number }[] = [];
  const services = new Map(state.services);
  let nextTree = state.nextTree;
  const fills: Fill[] = [];
  const publish: { service: string; key: Buffer; value: Buffer }[] = [];
  const retire: Published[] = [];
  const seen = new Map<string, string>();
  let unchanged = 0;

  for (const { tree: t, hash } of trees) {
    const where = (f: string) => `service ${t.service}: ${f}`;
    if (t.vip === 0) throw new PlanError(where('vip is 0.0.0.0'));
    if (t.port < 1 || t.port > 65535) throw new PlanError(where(`port ${t.port} is not 1..65535`));
    const k: SvcKey = { vip: t.vip, port: t.port };
    const ks = keyString(k);
    const other = seen.get(ks);
    if (other !== undefined) throw new PlanError(where(`vip:port is also used by service ${other}`));
    seen.set(ks, t.service);
    if (t.scopes.length > MAX_DEPTH) throw new PlanError(where(`scopes has ${t.scopes.length} levels, at most ${MAX_DEPTH}`));

    const levelScope = t.scopes.map((scope, i) => {
      let slot = scopes.get(scope) ?? FIXED_SCOPES.get(scope);
      if (slot === undefined) {
        slot = firstFreeSlot(scopes);
        if (slot === undefined) {
          throw new PlanError(where(`scopes[${i}] ${scope}: no scope slot left (${MAX_SCOPES - SCOPE_FIRST_DYNAMIC} dynamic scopes at most)`));
        }
        scopes.set(scope, slot);
        newScopes.push({ scope, slot });
      }
      return slot;
    });

    const held = services.get(ks);
    if (held && held.hash === hash && held.name === t.service) {
      unchanged++;
      continue;
    }

    const n = t.backends.length;
    const range = allocator.allocate(n);
    if (!range) {
      throw new PlanError(
        where(`endpoint map full: ${n} slots needed, ${allocator.capacity - allocator.inUse} free of ${allocator.capacity} (retired trees hold theirs for one grace period)`),
      );
    }
    const treeId = nextTree++;
    if (nextTree > 0xffffffff) nextTree = 1;

    const epKeys = Buffer.alloc(n * 4);
    const epValues = Buffer.alloc(n * LAYOUT.canopy_backend.size);
    t.backends.forEach((b, i) => {
      writeSlot(epKeys, i * 4, range.start + i);
      writeBackend(epValues, i * LAYOUT.canopy_backend.size, b.ipv4, b.port);
    });

    const nodeCount = t.nodes.length - 1;
    const nodeKeys = Buffer.alloc(nodeCount * LAYOUT.canopy_node_key.size);
    const nodeValues = Buffer.alloc(nodeCount * LAYOUT.canopy_node.size);
    const siblings = new Map<string, string>();
    for (let i = 1; i < t.nodes.length; i++) {
      const node = t.nodes[i]!;
      const value = valueHash(node.value);
      const sib = `${node.parent}/${value}`;
      const clash = siblings.get(sib);
      if (clash !== undefined) throw new PlanError(where(`nodes[${i}] value ${JSON.stringify(node.value)} hashes like its sibling ${JSON.stringify(clash)}`));
      siblings.set(sib, node.value);
      writeNodeKey(nodeKeys, (i - 1) * LAYOUT.canopy_node_key.size, { tree: treeId, parent: node.parent, value });
      writeNode(nodeValues, (i - 1) * LAYOUT.canopy_node.size, { id: i, start: node.start, count: node.end - node.start });
    }

    fills.push({
      service: t.service,
      endpoints: { keys: epKeys, values: epValues, count: n },
      nodes: { keys: nodeKeys, values: nodeValues, count: nodeCount },
    });
    publish.push({
      service: t.service,
      key: svcKey(k),
      value: svcValue({ tree: treeId, epBase: range.start, epCount: n, mode: MODE[t.mode], depth: t.scopes.length, levelScope }),
    });
    if (held) retire.push(held);
    services.set(ks, { name: t.service, key: k, tree: treeId, range, nodeKeys, nodeCount, hash });
  }

  const unpublish: { service: string; key: Buffer }[] = [];
  for (const [ks, held] of state.services) {
    if (seen.has(ks)) continue;
    unpublish.push({ service: held.name, key: svcKey(held.key) });
    retire.push(held);
    services.delete(ks);
  }

  return {
    newScopes,
    fills,
    publish,
    unpublish,
    retire,
    unchanged,
    next: { services, allocator, nextTree, scopes },
  };
}

function firstFreeSlot(scopes: ReadonlyMap<string, number>): number | undefined {
  const used = new Set(scopes.values());
  for (let s = SCOPE_FIRST_DYNAMIC; s < MAX_SCOPES; s++) if (!used.has(s)) return s;
  return undefined;
}
