/**
 * The N-API binding over the system libbpf (bpf/addon/canopy_bpf.c), built
 * by `npm run build:bpf` into bpf/build/. Loading it is optional: a machine
 * without the build gets the reason instead of a crash.
 */
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { packagePath } from '../platform/paths.js';
import { CodedError } from '../domain/errors.js';

export interface LoadedObject {
  readonly maps: Readonly<Record<string, number>>;
  readonly programs: Readonly<Record<string, number>>;
  /** Maps that were already pinned and have been reused. */
  readonly reused: readonly string[];
  /** Each map's size as loaded (a reused map keeps the size it was created with). */
  readonly maxEntries: Readonly<Record<string, number>>;
}

/** A cgroup hook the addon attaches to (4 and 6 are connect4 and connect6). */
export type Hook = 4 | 6 | 'getpeername4' | 'getpeername6' | 'recvmsg4' | 'recvmsg6' | 'sendmsg4' | 'sendmsg6';

export interface BpfAddon {
  load(objectPath: string, pinDir: string, maxEntries: Readonly<Record<string, number>>): LoadedObject;
  objGet(path: string): number;
  objPin(fd: number, path: string): void;
  progId(fd: number): number;
  progTag(fd: number): string;
  /** `hook` 6: cgroup/connect6, or a hook by name; 4 (the default): cgroup/connect4. */
  replaceConnect4(newProgFd: number, oldProgFd: number, cgroupPath: string, hook?: Hook): void;
  attachConnect4(progFd: number, cgroupPath: string, hook?: Hook): void;
  detachConnect4(progFd: number, cgroupPath: string, hook?: Hook): void;
  queryConnect4(cgroupPath: string, hook?: Hook): number[];
  close(fd: number): void;
  mapUpdate(fd: number, key: Buffer, value: Buffer, flags: number): void;
  mapLookup(fd: number, key: Buffer, valueOut: Buffer): boolean;
  mapDelete(fd: number, key: Buffer): boolean;
  mapNextKey(fd: number, key: Buffer | null, keyOut: Buffer): boolean;
  mapUpdateBatch(fd: number, keys: Buffer, values: Buffer, count: number, flags: number): number;
  mapDeleteBatch(fd: number, keys: Buffer, count: number): number;
  testRun(progFd: number, ctx: Buffer): { retval: number; duration: number };
  possibleCpus(): number;
  /** A program's run-time counters (kernel.bpf_stats_enabled, or while an enableStats() fd is open). */
  progStats(fd: number): { runTimeNs: number; runCnt: number };
  /** Turns BPF run-time statistics on until the returned fd is closed. */
  enableStats(): number;
}

export const BPF_ANY = 0;
export const BPF_NOEXIST = 1;
export const BPF_EXIST = 2;

export function addonPath(): string {
  return packagePath('bpf', 'build', 'Release', 'canopy_bpf.node');
}

export function objectPath(): string {
  return packagePath('bpf', 'build', 'canopy.bpf.o');
}

/**
 * The oldest kernel the object loads on: its test harness is a SEC("syscall")
 * program (5.14); cgroup/connect4 with bpf_link-free attach and the helpers
 * it calls are older.
 */
export const MIN_KERNEL: readonly [number, number] = [5, 14];

/** Why a kernel release (uname -r) is too old, or undefined when it will do. */
export function kernelTooOld(release: string): string | undefined {
  const m = /^(\d+)\.(\d+)/.exec(release);
  if (!m) return undefined; // unknown format: let the load say what is missing
  const [major, minor] = [Number(m[1]), Number(m[2])];
  if (major > MIN_KERNEL[0] || (major === MIN_KERNEL[0] && minor >= MIN_KERNEL[1])) return undefined;
  return `kernel ${release} is too old for the datapath: Linux ${MIN_KERNEL.join('.')} or newer is required (BPF syscall programs, cgroup connect4)`;
}

let cached: BpfAddon | undefined;

/** The addon, or an Error saying why it cannot be had here. */
export function loadAddon(): BpfAddon {
  if (cached) return cached;
  if (process.platform !== 'linux')
    throw new CodedError('CANOPY_DATAPATH_UNAVAILABLE', 'the kernel datapath needs Linux');
  const file = addonPath();
  if (!existsSync(file))
    throw new CodedError(
      'CANOPY_DATAPATH_UNAVAILABLE',
      `the BPF addon is not built (${file} is missing): run npm run build:bpf`,
    );
  if (!existsSync(objectPath()))
    throw new CodedError(
      'CANOPY_DATAPATH_UNAVAILABLE',
      `the BPF object is not built (${objectPath()} is missing): run npm run build:bpf`,
    );
  cached = createRequire(import.meta.url)(file) as BpfAddon;
  return cached;
}

/** Why the kernel tests cannot run here, or undefined when they can. */
export function kernelUnavailable(): string | undefined {
  try {
    loadAddon();
  } catch (err) {
    return (err as Error).message;
  }
  if (typeof process.getuid === 'function' && process.getuid() !== 0)
    return 'BPF needs root (or CAP_BPF + CAP_NET_ADMIN)';
  return undefined;
}
