/**
 * Where a program's real connects go: canopy_revnat keeps every rewritten
 * socket's VIP and backend (at its cookie's slot), so after clearing it and
 * running N connects from a cgroup, the distinct backends of its entries for
 * that VIP are the program's picks. The program bench compares two builds'
 * picks with it: a faster program must send the same caller to the same set
 * of backends.
 */
import path from 'node:path';
import { MAP, REVNAT_SLOTS } from '../server/src/agent/abi.js';
import type { BpfAddon } from '../server/src/agent/bpf.js';
import { intToIpv4, ipv4ToInt } from '../server/src/resources/tree-codec.js';
import { connectNs } from './kernel-fixtures.js';

const ENTRY = 48; // struct canopy_revnat
const VIP_AT = 8;
const BACKEND_AT = 24;

/** Backend addresses (dotted) reached by `calls` connects from `cgroup` to vip:port, read back from the pins. */
export function pickedBackends(
  bpf: BpfAddon,
  bin: string,
  pinDir: string,
  c: { cgroup: string; vip: string; port: number; calls: number; sendto: boolean },
): Set<string> {
  const fd = bpf.objGet(path.join(pinDir, MAP.revnat));
  try {
    const keys = Buffer.alloc(4 * REVNAT_SLOTS);
    for (let i = 0; i < REVNAT_SLOTS; i++) keys.writeUInt32LE(i, 4 * i);
    bpf.mapUpdateBatch(fd, keys, Buffer.alloc(ENTRY * REVNAT_SLOTS), REVNAT_SLOTS, 0);
    connectNs(bin, c.cgroup, c.vip, c.port, c.calls, c.sendto);
    const vip = ipv4ToInt(c.vip)!;
    const out = new Set<string>();
    const value = Buffer.alloc(ENTRY);
    for (let i = 0; i < REVNAT_SLOTS; i++) {
      if (!bpf.mapLookup(fd, keys.subarray(4 * i, 4 * i + 4), value)) continue;
      if (value.readBigUInt64LE(0) === 0n || value.readUInt32BE(VIP_AT) !== vip) continue;
      out.add(intToIpv4(value.readUInt32BE(BACKEND_AT)));
    }
    return out;
  } finally {
    bpf.close(fd);
  }
}

/** What differs between two pick sets, for an error message; empty when they are equal. */
export function pickDifference(a: ReadonlySet<string>, b: ReadonlySet<string>): string {
  const onlyA = [...a].filter((x) => !b.has(x));
  const onlyB = [...b].filter((x) => !a.has(x));
  if (onlyA.length === 0 && onlyB.length === 0) return '';
  return `${onlyA.length} only in the first (${onlyA.slice(0, 3).join(', ')}), ${onlyB.length} only in the second (${onlyB.slice(0, 3).join(', ')})`;
}
