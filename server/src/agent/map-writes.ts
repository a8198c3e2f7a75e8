/**
 * The agent's maps by role, and the write primitives apply() and retirement
 * share: batch updates with a per-entry fallback, and key-by-key deletes.
 */
import { LAYOUT, MAP } from './abi.js';
import { BPF_ANY, type BpfAddon } from './bpf.js';

export type Fds = Record<keyof typeof MAP, number>;

export function mapFds(get: (name: string) => number): Fds {
  return {
    services: get(MAP.services),
    services6: get(MAP.services6),
    nodes: get(MAP.nodes),
    endpoints: get(MAP.endpoints),
    workloads: get(MAP.workloads),
    nodeloc: get(MAP.nodeloc),
    scopes: get(MAP.scopes),
    stats: get(MAP.stats),
    revnat: get(MAP.revnat),
    config: get(MAP.config),
  };
}

/** canopy_services, or canopy_services6 for an IPv6 key. */
export function servicesFd(fds: Fds, key: Buffer): number {
  return key.length === LAYOUT.canopy_svc_key6.size ? fds.services6 : fds.services;
}

/** Writes `count` packed entries (keys of `ks` bytes, values of `vs`); returns how many. */
export function writeBatch(
  bpf: BpfAddon,
  batchUpdates: boolean,
  fd: number,
  keys: Buffer,
  values: Buffer,
  count: number,
  ks: number,
  vs: number,
): number {
  if (count === 0) return 0;
  try {
    if (!batchUpdates) throw Object.assign(new Error('batch updates off'), { code: 'ENOTSUPP' });
    bpf.mapUpdateBatch(fd, keys, values, count, BPF_ANY);
  } catch (err) {
    const code = (err as { code?: string }).code;
    if (code !== 'EINVAL' && code !== 'ENOTSUPP' && code !== 'ENOTSUP') throw err;
    // A kernel without batch ops for this map type: one write per entry.
    for (let i = 0; i < count; i++) {
      bpf.mapUpdate(fd, keys.subarray(i * ks, (i + 1) * ks), values.subarray(i * vs, (i + 1) * vs), BPF_ANY);
    }
  }
  return count;
}

export function deleteKeys(bpf: BpfAddon, fd: number, keys: Buffer, count: number, ks: number): void {
  for (let i = 0; i < count; i++) bpf.mapDelete(fd, keys.subarray(i * ks, (i + 1) * ks));
}
