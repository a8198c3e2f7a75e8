/**
 * The TypeScript mirror of bpf/canopy_abi.h: every map's key and value, as offsets into a Buffer.
 * server/test/bpf-abi.test.ts compiles the header and checks them against it. Change both together.
 *
 * Byte order: addresses and ports are network order (as the kernel's
 * bpf_sock_addr holds them); everything else is the host's order.
 */
import os from 'node:os';
import { CodedError } from '../domain/errors.js';

export const MAX_DEPTH = 8;
export const MAX_SCOPES = 16;
export const SCOPE_REGION = 0;
export const SCOPE_ZONE = 1;
export const SCOPE_SUBZONE = 2;
export const SCOPE_FIRST_DYNAMIC = 3;

export const DEFAULT_MAX = {
  services: 4096,
  nodes: 262144,
  endpoints: 1048576,
  workloads: 65536,
} as const;

export const MODE = { random: 0, failover: 1, strict: 2, networkFirst: 3 } as const;
export const SVC_WEIGHTED = 1;
export const WEIGHT_STEPS = 21;
/** Slots of canopy_revnat (a socket's VIP, for getpeername/recvmsg), indexed by socket cookie. */
export const REVNAT_SLOTS = 262144;
/** canopy_node_key.level bit of the merged tree's nodes (network-first services). */
export const ALT_LEVEL = 0x80000000;
/** A node's path hash: (parent's ^ value hash) * PATH_PRIME, mod 2^64. */
export const PATH_PRIME = 0x100000001b3n;
export const VERDICT = { pass: 0, rewrite: 1, refuse: 2 } as const;

export const MAP = {
  services: 'canopy_services',
  services6: 'canopy_services6',
  nodes: 'canopy_nodes',
  endpoints: 'canopy_endpoints',
  workloads: 'canopy_workloads',
  nodeloc: 'canopy_nodeloc',
  scopes: 'canopy_scopes',
  config: 'canopy_config',
  stats: 'canopy_stats',
  revnat: 'canopy_revnat',
} as const;

/** Maps of earlier builds that this one no longer has: their pins are removed on open (an upgrade). */
export const RETIRED_MAPS = ['canopy_peers'] as const;

export const PROGRAM = {
  connect4: 'canopy_connect4',
  connect6: 'canopy_connect6',
  selectTest: 'canopy_select_test',
} as const;

/** Programs beside connect4 (which open() handles on its own), each with its cgroup hook. */
export const HOOK_PROGRAMS = [
  { name: 'canopy_connect6', hook: 6 },
  { name: 'canopy_getpeername4', hook: 'getpeername4' },
  { name: 'canopy_getpeername6', hook: 'getpeername6' },
  { name: 'canopy_recvmsg4', hook: 'recvmsg4' },
  { name: 'canopy_recvmsg6', hook: 'recvmsg6' },
  { name: 'canopy_sendmsg4', hook: 'sendmsg4' },
  { name: 'canopy_sendmsg6', hook: 'sendmsg6' },
] as const;

/** struct layouts: size and field offsets, in the header's order. */
export const LAYOUT = {
  canopy_svc_key: { size: 8, fields: { vip: 0, port: 4, pad: 6 } },
  canopy_svc_key6: { size: 20, fields: { vip: 0, port: 16, pad: 18 } },
  canopy_bucket: { size: 20, fields: { base: 0, split: 4, base2: 8, count: 12, total: 16 } },
  canopy_node_key: { size: 16, fields: { tree: 0, level: 4, value: 8 } },
  canopy_node: { size: 24, fields: { b: 0, id: 20 } },
  canopy_backend: { size: 28, fields: { ip: 0, port: 4, pad: 6, wsum: 8, ip6: 12 } },
  canopy_revnat: { size: 48, fields: { cookie: 0, vip: 8, backend: 24, port: 40, bport: 42, pad: 44 } },
  canopy_config: { size: 8, fields: { workload_levels: 0, pad: 4 } },
  canopy_locality: { size: 128, fields: { value: 0 } },
  canopy_stats: { size: 32, fields: { connects: 0, rewritten: 8, refused: 16, lookups: 24 } },
  canopy_test_ctx: {
    size: 48,
    fields: {
      vip: 0,
      port: 4,
      pad: 6,
      cgroup: 8,
      rand: 16,
      verdict: 20,
      ip: 24,
      bport: 28,
      pad2: 30,
      matched: 32,
      lookups: 36,
      pad3: 40,
    },
  },
} as const;

/** Constants the header defines, checked by the same test. */
export const CONSTANTS = {
  CANOPY_MAX_DEPTH: MAX_DEPTH,
  CANOPY_MAX_SCOPES: MAX_SCOPES,
  CANOPY_SCOPE_REGION: SCOPE_REGION,
  CANOPY_SCOPE_ZONE: SCOPE_ZONE,
  CANOPY_SCOPE_SUBZONE: SCOPE_SUBZONE,
  CANOPY_SCOPE_FIRST_DYNAMIC: SCOPE_FIRST_DYNAMIC,
  CANOPY_MAX_SERVICES: DEFAULT_MAX.services,
  CANOPY_MAX_NODES: DEFAULT_MAX.nodes,
  CANOPY_MAX_ENDPOINTS: DEFAULT_MAX.endpoints,
  CANOPY_MAX_WORKLOADS: DEFAULT_MAX.workloads,
  CANOPY_MODE_RANDOM: MODE.random,
  CANOPY_MODE_FAILOVER: MODE.failover,
  CANOPY_MODE_STRICT: MODE.strict,
  CANOPY_MODE_NETWORK_FIRST: MODE.networkFirst,
  CANOPY_SVC_WEIGHTED: SVC_WEIGHTED,
  CANOPY_WEIGHT_STEPS: WEIGHT_STEPS,
  CANOPY_REVNAT_SLOTS: REVNAT_SLOTS,
  CANOPY_ALT_LEVEL: ALT_LEVEL,
  CANOPY_PASS: VERDICT.pass,
  CANOPY_REWRITE: VERDICT.rewrite,
  CANOPY_REFUSE: VERDICT.refuse,
} as const;

/** Map values are in host byte order (keys that the program compares as addresses are not). */
export const LE = os.endianness() === 'LE';

export function u32(b: Buffer, off: number, v: number): void {
  if (LE) b.writeUInt32LE(v >>> 0, off);
  else b.writeUInt32BE(v >>> 0, off);
}

export function readU32(b: Buffer, off: number): number {
  return LE ? b.readUInt32LE(off) : b.readUInt32BE(off);
}

export function u64(b: Buffer, off: number, v: bigint): void {
  if (LE) b.writeBigUInt64LE(v, off);
  else b.writeBigUInt64BE(v, off);
}

function readU64(b: Buffer, off: number): bigint {
  return LE ? b.readBigUInt64LE(off) : b.readBigUInt64BE(off);
}

/** host-order IPv4 (a << 24 | ...) written in network order. */
function ipNet(b: Buffer, off: number, ip: number): void {
  b.writeUInt32BE(ip >>> 0, off);
}

// ------------------------------------------------------------------ services

export interface SvcKey {
  readonly vip: number;
  readonly port: number;
  /** An IPv6 VIP (16 bytes, network order): the key is a canopy_svc_key6 in canopy_services6. */
  readonly vip6?: Uint8Array;
}

/** A node's bucket (struct canopy_bucket): entry i is at base + i below split, else at base2 + i - split. */
export interface BucketValue {
  readonly base: number;
  readonly split: number;
  readonly base2: number;
  readonly count: number;
  /** The weights of all entries. */
  readonly total: number;
}

export function writeBucket(b: Buffer, off: number, v: BucketValue): void {
  const f = LAYOUT.canopy_bucket.fields;
  u32(b, off + f.base, v.base);
  u32(b, off + f.split, v.split);
  u32(b, off + f.base2, v.base2);
  u32(b, off + f.count, v.count);
  u32(b, off + f.total, v.total);
}

export function readBucket(b: Buffer, off = 0): BucketValue {
  const f = LAYOUT.canopy_bucket.fields;
  return {
    base: readU32(b, off + f.base),
    split: readU32(b, off + f.split),
    base2: readU32(b, off + f.base2),
    count: readU32(b, off + f.count),
    total: readU32(b, off + f.total),
  };
}

export function writeSvcKey(b: Buffer, off: number, k: SvcKey): void {
  const f = LAYOUT.canopy_svc_key.fields;
  ipNet(b, off + f.vip, k.vip);
  b.writeUInt16BE(k.port, off + f.port);
  b.writeUInt16LE(0, off + f.pad);
}

/** A canopy_svc_key, or a canopy_svc_key6 for an IPv6 VIP (tell them apart by length). */
export function svcKey(k: SvcKey): Buffer {
  if (k.vip6) {
    const f = LAYOUT.canopy_svc_key6.fields;
    const b = Buffer.alloc(LAYOUT.canopy_svc_key6.size);
    b.set(k.vip6, f.vip);
    b.writeUInt16BE(k.port, f.port);
    return b;
  }
  const b = Buffer.alloc(LAYOUT.canopy_svc_key.size);
  writeSvcKey(b, 0, k);
  return b;
}

export function readSvcKey(b: Buffer): SvcKey {
  if (b.length === LAYOUT.canopy_svc_key6.size) {
    const f = LAYOUT.canopy_svc_key6.fields;
    return { vip: 0, vip6: Uint8Array.from(b.subarray(f.vip, f.vip + 16)), port: b.readUInt16BE(f.port) };
  }
  const f = LAYOUT.canopy_svc_key.fields;
  return { vip: b.readUInt32BE(f.vip), port: b.readUInt16BE(f.port) };
}

// --------------------------------------------------------------------- nodes

export interface NodeKey {
  readonly tree: number;
  /** 1..depth; | ALT_LEVEL in the merged tree */
  readonly level: number;
  /** path hash (pathHash) */
  readonly value: bigint;
}

/** The path hash of a node whose parent's is `parent` (0 at the root) and whose value hashes to `value`. */
export function pathHash(parent: bigint, value: bigint): bigint {
  return ((parent ^ value) * PATH_PRIME) & 0xffffffffffffffffn;
}

export function writeNodeKey(b: Buffer, off: number, k: NodeKey): void {
  const f = LAYOUT.canopy_node_key.fields;
  u32(b, off + f.tree, k.tree);
  u32(b, off + f.level, k.level);
  u64(b, off + f.value, k.value);
}

export function readNodeKey(b: Buffer, off = 0): NodeKey {
  const f = LAYOUT.canopy_node_key.fields;
  return { tree: readU32(b, off + f.tree), level: readU32(b, off + f.level), value: readU64(b, off + f.value) };
}

export function writeNode(b: Buffer, off: number, n: BucketValue & { id: number }): void {
  writeBucket(b, off + LAYOUT.canopy_node.fields.b, n);
  u32(b, off + LAYOUT.canopy_node.fields.id, n.id);
}

export function readNode(b: Buffer, off = 0): BucketValue & { id: number } {
  return { ...readBucket(b, off + LAYOUT.canopy_node.fields.b), id: readU32(b, off + LAYOUT.canopy_node.fields.id) };
}

// ----------------------------------------------------------------- endpoints

export function writeSlot(b: Buffer, off: number, slot: number): void {
  u32(b, off, slot);
}

/** A bucket entry of an IPv4 backend (or an IPv6 backend's address slot, ip 0); `wsum`: its Fenwick partial sum. */
export function writeBackend(b: Buffer, off: number, ip: number, port: number, wsum = 0, ip6?: Uint8Array): void {
  const f = LAYOUT.canopy_backend.fields;
  ipNet(b, off + f.ip, ip);
  b.writeUInt16BE(port, off + f.port);
  b.writeUInt16LE(0, off + f.pad);
  if (ip6) b.set(ip6, off + f.ip6);
  else b.fill(0, off + f.ip6, off + f.ip6 + 16);
  u32(b, off + f.wsum, wsum);
}

/** A bucket entry of an IPv6 service: 1 + the slot that holds the backend's address. */
export function writeAddressRef(b: Buffer, off: number, addressSlot: number, wsum: number): void {
  const f = LAYOUT.canopy_backend.fields;
  b.fill(0, off, off + LAYOUT.canopy_backend.size);
  u32(b, off + f.ip, addressSlot + 1);
  u32(b, off + f.wsum, wsum);
}

/** An IPv6 service's bucket entry: 1 + the slot that holds its address (0: none). */
export const readSlotRef = (b: Buffer, off = 0): number => readU32(b, off + LAYOUT.canopy_backend.fields.ip);

// ----------------------------------------------------------------- workloads

export function cgroupKey(id: bigint): Buffer {
  const b = Buffer.alloc(8);
  u64(b, 0, id);
  return b;
}

/** A workload locality: value hash per scope slot (0 = unset). */
export function localityValue(values: ReadonlyMap<number, bigint>): Buffer {
  const b = Buffer.alloc(LAYOUT.canopy_locality.size);
  for (const [slot, v] of values) {
    if (slot < 0 || slot >= MAX_SCOPES)
      throw new CodedError('CANOPY_BROKEN_INVARIANT', `scope slot ${slot} is outside 0..${MAX_SCOPES - 1}`);
    u64(b, LAYOUT.canopy_locality.fields.value + slot * 8, v);
  }
  return b;
}

export function configValue(workloadLevels: number): Buffer {
  const b = Buffer.alloc(LAYOUT.canopy_config.size);
  u32(b, LAYOUT.canopy_config.fields.workload_levels, workloadLevels);
  return b;
}

export function u32Key(n: number): Buffer {
  const b = Buffer.alloc(4);
  u32(b, 0, n);
  return b;
}

export function u64Value(v: bigint): Buffer {
  const b = Buffer.alloc(8);
  u64(b, 0, v);
  return b;
}

export function readU64At(b: Buffer, off = 0): bigint {
  return readU64(b, off);
}

// --------------------------------------------------------------------- stats

export interface Stats {
  connects: bigint;
  rewritten: bigint;
  refused: bigint;
  lookups: bigint;
}

/** Sums a per-CPU canopy_stats value (one 32-byte struct per possible CPU). */
export function sumStats(b: Buffer, cpus: number): Stats {
  const f = LAYOUT.canopy_stats.fields;
  const s: Stats = { connects: 0n, rewritten: 0n, refused: 0n, lookups: 0n };
  for (let c = 0; c < cpus; c++) {
    const base = c * LAYOUT.canopy_stats.size;
    s.connects += readU64(b, base + f.connects);
    s.rewritten += readU64(b, base + f.rewritten);
    s.refused += readU64(b, base + f.refused);
    s.lookups += readU64(b, base + f.lookups);
  }
  return s;
}

// -------------------------------------------------------------------- hashes

const FNV_OFFSET = 0xcbf29ce484222325n;
const FNV_PRIME = 0x100000001b3n;
const MASK = 0xffffffffffffffffn;
const utf8 = new TextEncoder();

/** FNV-1a 64 of a locality value or scope name; never 0 (0 means "unset" in the maps). */
export function valueHash(s: string): bigint {
  let h = FNV_OFFSET;
  for (const byte of utf8.encode(s)) {
    h ^= BigInt(byte);
    h = (h * FNV_PRIME) & MASK;
  }
  return h === 0n ? 1n : h;
}
