/**
 * Workload entries: the locality of the node (cgroup id 0) and of each
 * workload cgroup, one value per scope slot, in canopy_workloads; and the
 * cgroup levels they sit at, in canopy_config, for the kernel's ancestor walk.
 */
import { scopeValue, type Placement, type Scope } from '../domain/locality.js';
import { cgroupKey, configValue, localityValue, readU64At, u32Key, valueHash } from './abi.js';
import { BPF_ANY, type BpfAddon } from './bpf.js';
import { cgroupId, cgroupLevel } from './cgroups.js';
import type { Fds } from './map-writes.js';
import { FIXED_SCOPES } from './planner.js';

export interface Workload {
  /** cgroup directory; its inode number is the kernel's cgroup id. */
  readonly cgroup: string;
  readonly placement: Placement;
}

export interface WorkloadEntry {
  readonly id: bigint;
  readonly placement: Placement;
}

export interface ResolvedWorkloads {
  readonly entries: WorkloadEntry[];
  /** Bit l: a workload cgroup sits at level l (what the kernel's ancestor walk looks at). */
  readonly levels: number;
  /** Workloads whose cgroup could not be read, each with the reason. */
  readonly skipped: { cgroup: string; reason: string }[];
}

/** The node's entry first, then each workload whose cgroup exists. */
export function resolveWorkloads(node: Placement, workloads: readonly Workload[]): ResolvedWorkloads {
  const skipped: { cgroup: string; reason: string }[] = [];
  const entries: WorkloadEntry[] = [{ id: 0n, placement: node }];
  let levels = 0;
  for (const w of workloads) {
    try {
      entries.push({ id: cgroupId(w.cgroup), placement: w.placement });
      // Any entry sets a bit: with none set the kernel skips the cgroup lookup (canopy_config). A cgroup
      // deeper than 31 levels is found by its own entry; its descendants do not inherit it.
      levels |= 1 << Math.min(cgroupLevel(w.cgroup), 31);
    } catch (err) {
      skipped.push({ cgroup: w.cgroup, reason: (err as Error).message });
    }
  }
  return { entries, levels: levels >>> 0, skipped };
}

/**
 * Every scope a workload can have a value for. After a restart the dynamic
 * scopes' names are known only by hash: the placements name them.
 */
export function placementScopes(entries: readonly WorkloadEntry[]): Set<string> {
  const names = new Set(['network', 'node', 'cluster']);
  for (const e of entries) for (const k of Object.keys(e.placement.labels)) names.add(`label:${k}`);
  return names;
}

/** Writes every entry for these scope slots and drops the others; returns the map writes. */
export function writeWorkloads(
  bpf: BpfAddon,
  fds: Fds,
  entries: readonly WorkloadEntry[],
  levels: number,
  scopes: ReadonlyMap<string, number>,
): number {
  const all = new Map<string, number>([...FIXED_SCOPES, ...scopes]);
  const keep = new Set<bigint>();
  for (const w of entries) {
    const values = new Map<number, bigint>();
    for (const [scope, slot] of all) values.set(slot, valueHash(scopeValue(scope as Scope, w.placement)));
    bpf.mapUpdate(fds.workloads, cgroupKey(w.id), localityValue(values), BPF_ANY);
    // The node's own locality, where the kernel reads it for a cgroup without an entry.
    if (w.id === 0n) bpf.mapUpdate(fds.nodeloc, u32Key(0), localityValue(values), BPF_ANY);
    keep.add(w.id);
  }
  // The agent owns the map: drop entries of workloads no longer configured.
  const k = Buffer.alloc(8);
  const drop: Buffer[] = [];
  let prev: Buffer | null = null;
  while (bpf.mapNextKey(fds.workloads, prev, k)) {
    const key = Buffer.from(k);
    if (!keep.has(readU64At(key))) drop.push(key);
    prev = key;
  }
  for (const key of drop) bpf.mapDelete(fds.workloads, key);
  // Levels last: an ancestor walk never looks for an entry not yet written.
  bpf.mapUpdate(fds.config, u32Key(0), configValue(levels), BPF_ANY);
  return entries.length + drop.length + 2;
}
