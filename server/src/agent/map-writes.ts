/**
 * The agent's maps by role, and the write primitives apply() and retirement
 * share: batch updates with a per-entry fallback, and key-by-key deletes; and
 * the kernel side of an apply's steps: a fill and the switch of service entries.
 */
import { LAYOUT, MAP } from './abi.js';
import { BPF_ANY, type BpfAddon } from './bpf.js';
import type { MapWrite } from './layout.js';
import type { Fill, Plan } from './planner.js';

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
  if (batchUpdates) {
    try {
      bpf.mapUpdateBatch(fd, keys, values, count, BPF_ANY);
      return count;
    } catch (err) {
      const code = (err as { code?: string }).code;
      if (code !== 'EINVAL' && code !== 'ENOTSUPP' && code !== 'ENOTSUP') throw err;
    }
  }
  // Batch updates off, or a kernel without batch ops for this map type: one write per entry.
  for (let i = 0; i < count; i++) {
    bpf.mapUpdate(fd, keys.subarray(i * ks, (i + 1) * ks), values.subarray(i * vs, (i + 1) * vs), BPF_ANY);
  }
  return count;
}

export function deleteKeys(bpf: BpfAddon, fd: number, keys: Buffer, count: number, ks: number): void {
  for (let i = 0; i < count; i++) bpf.mapDelete(fd, keys.subarray(i * ks, (i + 1) * ks));
}

/** Writes of an edited version (layout.ts), in order; consecutive slot writes go in one batch. Returns how many. */
export function writeInOrder(
  bpf: BpfAddon,
  fds: Fds,
  batchUpdates: boolean,
  ws: readonly MapWrite[],
  undo: (() => void)[],
): number {
  const vs = LAYOUT.canopy_backend.size;
  let i = 0;
  while (i < ws.length) {
    const w = ws[i]!;
    if (w.map === 'endpoints') {
      let j = i;
      while (j < ws.length && ws[j]!.map === 'endpoints') j++;
      const run = ws.slice(i, j);
      const back = run.filter((x) => x.previous);
      writeBatch(
        bpf,
        batchUpdates,
        fds.endpoints,
        Buffer.concat(run.map((x) => x.key)),
        Buffer.concat(run.map((x) => x.value!)),
        run.length,
        4,
        vs,
      );
      if (back.length > 0) {
        const keys = Buffer.concat(back.map((x) => x.key));
        const values = Buffer.concat(back.map((x) => x.previous!));
        undo.push(() => writeBatch(bpf, batchUpdates, fds.endpoints, keys, values, back.length, 4, vs));
      }
      i = j;
      continue;
    }
    const fd = w.map === 'nodes' ? fds.nodes : servicesFd(fds, w.key);
    if (w.value) bpf.mapUpdate(fd, w.key, w.value, BPF_ANY);
    else bpf.mapDelete(fd, w.key);
    const previous = w.previous;
    undo.push(previous ? () => bpf.mapUpdate(fd, w.key, previous, BPF_ANY) : () => bpf.mapDelete(fd, w.key));
    i++;
  }
  return ws.length;
}

/** One service laid out afresh: its endpoint slots and node entries, in batches. Returns the map writes made. */
export function writeFill(bpf: BpfAddon, fds: Fds, batchUpdates: boolean, f: Fill, undo: (() => void)[]): number {
  // The endpoint slots were free: only the node entries need undoing.
  undo.push(() => deleteKeys(bpf, fds.nodes, f.nodes.keys, f.nodes.count, LAYOUT.canopy_node_key.size));
  const { endpoints: e, nodes: n } = f;
  return (
    writeBatch(bpf, batchUpdates, fds.endpoints, e.keys, e.values, e.count, 4, LAYOUT.canopy_backend.size) +
    writeBatch(
      bpf,
      batchUpdates,
      fds.nodes,
      n.keys,
      n.values,
      n.count,
      LAYOUT.canopy_node_key.size,
      LAYOUT.canopy_node.size,
    )
  );
}

/** The switch: one service entry written per published service, one deleted per removed one. */
export function switchServices(bpf: BpfAddon, fds: Fds, p: Plan, undo: (() => void)[]): number {
  for (const pub of p.publish) {
    const fd = servicesFd(fds, pub.key);
    bpf.mapUpdate(fd, pub.key, pub.value, BPF_ANY);
    const previous = pub.previous;
    undo.push(previous ? () => bpf.mapUpdate(fd, pub.key, previous, BPF_ANY) : () => bpf.mapDelete(fd, pub.key));
  }
  for (const u of p.unpublish) {
    const fd = servicesFd(fds, u.key);
    bpf.mapDelete(fd, u.key);
    undo.push(() => bpf.mapUpdate(fd, u.key, u.previous, BPF_ANY));
  }
  return p.publish.length + p.unpublish.length;
}
