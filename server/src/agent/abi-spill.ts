/**
 * The TypeScript mirror of the load-aware part of bpf/canopy_abi.h
 * (canopy_spill, canopy_spill_cnt); server/test/bpf-abi.test.ts checks it
 * with the rest. Addresses and ports in network order, the rest host order.
 */
import os from 'node:os';
import { CodedError } from '../domain/errors.js';

export const SVC_SPILL = 2;
export const SPILL_TARGETS = 16;
export const MAX_SPILLS = 65536;

export const SPILL_MAP = { spill: 'canopy_spill', counts: 'canopy_spill_cnt' } as const;

export const SPILL_LAYOUT = {
  canopy_spill_key: { size: 32, fields: { vip: 0, port: 16, family: 18, level: 20, path: 24 } },
  canopy_spill_target: { size: 16, fields: { level: 0, cum: 4, path: 8 } },
  canopy_spill: { size: 264, fields: { count: 0, total: 4, target: 8 } },
  canopy_spill_cnt_key: { size: 48, fields: { target: 0, client_level: 32, pad: 36, client_path: 40 } },
} as const;

export const SPILL_CONSTANTS = {
  CANOPY_SVC_SPILL: SVC_SPILL,
  CANOPY_SPILL_TARGETS: SPILL_TARGETS,
  CANOPY_MAX_SPILLS: MAX_SPILLS,
} as const;

const LE = os.endianness() === 'LE';

/** A service's VIP as the spill key holds it. */
export interface SpillService {
  /** host-order IPv4 (0 for an IPv6 service) */
  readonly vip: number;
  readonly vip6?: Uint8Array;
  readonly port: number;
}

export interface SpillNode {
  /** 0: the root; 1..depth */
  readonly level: number;
  /** path hash (abi.ts pathHash); 0 for the root */
  readonly path: bigint;
}

export function spillKey(s: SpillService, n: SpillNode): Buffer {
  const f = SPILL_LAYOUT.canopy_spill_key.fields;
  const b = Buffer.alloc(SPILL_LAYOUT.canopy_spill_key.size);
  if (s.vip6) b.set(s.vip6, f.vip);
  else b.writeUInt32BE(s.vip >>> 0, f.vip);
  b.writeUInt16BE(s.port, f.port);
  if (LE) {
    b.writeUInt16LE(s.vip6 ? 6 : 4, f.family);
    b.writeUInt32LE(n.level, f.level);
    b.writeBigUInt64LE(n.path, f.path);
  } else {
    b.writeUInt16BE(s.vip6 ? 6 : 4, f.family);
    b.writeUInt32BE(n.level, f.level);
    b.writeBigUInt64BE(n.path, f.path);
  }
  return b;
}

export function readSpillKey(b: Buffer): SpillService & SpillNode {
  const f = SPILL_LAYOUT.canopy_spill_key.fields;
  const family = LE ? b.readUInt16LE(f.family) : b.readUInt16BE(f.family);
  const port = b.readUInt16BE(f.port);
  const level = LE ? b.readUInt32LE(f.level) : b.readUInt32BE(f.level);
  const path = LE ? b.readBigUInt64LE(f.path) : b.readBigUInt64BE(f.path);
  return family === 6
    ? { vip: 0, vip6: Uint8Array.from(b.subarray(f.vip, f.vip + 16)), port, level, path }
    : { vip: b.readUInt32BE(f.vip), port, level, path };
}

/** A canopy_spill_cnt key: the service and node picked from, and the caller's node. */
export function readCountKey(b: Buffer): { target: SpillService & SpillNode; client: SpillNode } {
  const f = SPILL_LAYOUT.canopy_spill_cnt_key.fields;
  return {
    target: readSpillKey(b.subarray(f.target, f.target + SPILL_LAYOUT.canopy_spill_key.size)),
    client: {
      level: LE ? b.readUInt32LE(f.client_level) : b.readUInt32BE(f.client_level),
      path: LE ? b.readBigUInt64LE(f.client_path) : b.readBigUInt64BE(f.client_path),
    },
  };
}

/** A canopy_spill value: targets (at most SPILL_TARGETS) with cumulative weights. */
export function spillValue(targets: readonly (SpillNode & { readonly weight: number })[]): Buffer {
  if (targets.length > SPILL_TARGETS)
    throw new CodedError('CANOPY_BROKEN_INVARIANT', `${targets.length} spill targets, at most ${SPILL_TARGETS}`);
  const L = SPILL_LAYOUT;
  const b = Buffer.alloc(L.canopy_spill.size);
  let cum = 0;
  targets.forEach((t, i) => {
    cum += t.weight;
    const off = L.canopy_spill.fields.target + i * L.canopy_spill_target.size;
    const f = L.canopy_spill_target.fields;
    if (LE) {
      b.writeUInt32LE(t.level, off + f.level);
      b.writeUInt32LE(cum, off + f.cum);
      b.writeBigUInt64LE(t.path, off + f.path);
    } else {
      b.writeUInt32BE(t.level, off + f.level);
      b.writeUInt32BE(cum, off + f.cum);
      b.writeBigUInt64BE(t.path, off + f.path);
    }
  });
  const f = L.canopy_spill.fields;
  if (LE) {
    b.writeUInt32LE(targets.length, f.count);
    b.writeUInt32LE(cum, f.total);
  } else {
    b.writeUInt32BE(targets.length, f.count);
    b.writeUInt32BE(cum, f.total);
  }
  return b;
}

/** Sums a per-CPU __u64 counter (8 bytes per possible CPU). */
export function sumPerCpu(b: Buffer, cpus: number): bigint {
  let n = 0n;
  for (let c = 0; c < cpus; c++) n += LE ? b.readBigUInt64LE(c * 8) : b.readBigUInt64BE(c * 8);
  return n;
}
