/**
 * The context of the BPF_PROG_TEST_RUN harness (struct canopy_test_ctx in
 * bpf/canopy_abi.h, laid out in abi.ts's LAYOUT): the selection run with a
 * given cgroup and random number, for tests.
 */
import { LAYOUT, readU32, u32, u64 } from './abi.js';

/** host-order IPv4 written in network order */
const ipNet = (b: Buffer, off: number, ip: number) => b.writeUInt32BE(ip >>> 0, off);

export interface TestCtxIn {
  readonly vip: number;
  readonly port: number;
  readonly cgroup: bigint;
  readonly rand: number;
}

export interface TestCtxOut {
  readonly verdict: number;
  /** host-order IPv4 */
  readonly ip: number;
  readonly port: number;
  readonly matched: number;
  readonly lookups: number;
}

export function testCtx(i: TestCtxIn): Buffer {
  const f = LAYOUT.canopy_test_ctx.fields;
  const b = Buffer.alloc(LAYOUT.canopy_test_ctx.size);
  ipNet(b, f.vip, i.vip);
  b.writeUInt16BE(i.port, f.port);
  u64(b, f.cgroup, i.cgroup);
  u32(b, f.rand, i.rand);
  return b;
}

export function readTestCtx(b: Buffer): TestCtxOut {
  const f = LAYOUT.canopy_test_ctx.fields;
  return {
    verdict: readU32(b, f.verdict),
    ip: b.readUInt32BE(f.ip),
    port: b.readUInt16BE(f.bport),
    matched: readU32(b, f.matched),
    lookups: readU32(b, f.lookups),
  };
}
