/**
 * Canopy's programs on the cgroup: pinned so a restarted agent finds them,
 * attached once, and swapped in one step when the build changes, so the
 * datapath keeps serving through an upgrade.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { HOOK_PROGRAMS, PROGRAM } from './abi.js';
import type { BpfAddon, Hook } from './bpf.js';
import { repin } from './pins.js';

export interface InstalledPrograms {
  readonly progFd: number;
  readonly testFd: number;
  /** connect6 (IPv6 VIPs), getpeername4/6 and recvmsg4/6 (the peer is the VIP). */
  readonly hooks: { fd: number; hook: Hook }[];
  /** A pinned program of another build was swapped for this one. */
  readonly replaced: boolean;
}

/**
 * Pins and attaches connect4 (with its test-run twin) and the other hooks.
 * A pinned program from the same build is kept; one from another build is
 * swapped for this one in a single step (BPF_F_REPLACE) and re-pinned.
 * `program` gives the fd of a freshly loaded program by name.
 */
export function installPrograms(
  bpf: BpfAddon,
  program: (name: string) => number,
  pinDir: string,
  cgroup: string,
): InstalledPrograms {
  const progPin = path.join(pinDir, PROGRAM.connect4);
  const testPin = path.join(pinDir, PROGRAM.selectTest);
  let progFd = program(PROGRAM.connect4);
  let testFd = program(PROGRAM.selectTest);
  let replaced = false;
  if (existsSync(progPin)) {
    const pinnedFd = bpf.objGet(progPin);
    if (bpf.progTag(pinnedFd) === bpf.progTag(progFd)) {
      bpf.close(progFd);
      bpf.close(testFd);
      progFd = pinnedFd;
      testFd = existsSync(testPin) ? bpf.objGet(testPin) : (bpf.objPin(testFd, testPin), testFd);
    } else {
      if (bpf.queryConnect4(cgroup).includes(bpf.progId(pinnedFd))) bpf.replaceConnect4(progFd, pinnedFd, cgroup);
      bpf.close(pinnedFd);
      repin(bpf, progFd, progPin);
      repin(bpf, testFd, testPin);
      replaced = true;
    }
  } else {
    bpf.objPin(progFd, progPin);
    bpf.objPin(testFd, testPin);
  }
  const id = bpf.progId(progFd);
  if (!bpf.queryConnect4(cgroup).includes(id)) bpf.attachConnect4(progFd, cgroup);
  const hooks = HOOK_PROGRAMS.map((p) => ({
    hook: p.hook,
    ...installHook(bpf, program(p.name), path.join(pinDir, p.name), cgroup, p.hook),
  }));
  return {
    progFd,
    testFd,
    hooks: hooks.map(({ fd, hook }) => ({ fd, hook })),
    replaced: replaced || hooks.some((h) => h.replaced),
  };
}

/**
 * Pins and attaches a program on its cgroup hook as installPrograms does
 * connect4: a pinned program of the same build is kept, one of another build
 * is swapped for this one in a single step (BPF_F_REPLACE).
 */
function installHook(
  bpf: BpfAddon,
  fd: number,
  pin: string,
  cgroup: string,
  hook: Hook,
): { fd: number; replaced: boolean } {
  let replaced = false;
  if (existsSync(pin)) {
    const pinned = bpf.objGet(pin);
    if (bpf.progTag(pinned) === bpf.progTag(fd)) {
      bpf.close(fd);
      fd = pinned;
    } else {
      if (bpf.queryConnect4(cgroup, hook).includes(bpf.progId(pinned))) bpf.replaceConnect4(fd, pinned, cgroup, hook);
      bpf.close(pinned);
      repin(bpf, fd, pin);
      replaced = true;
    }
  } else {
    bpf.objPin(fd, pin);
  }
  if (!bpf.queryConnect4(cgroup, hook).includes(bpf.progId(fd))) bpf.attachConnect4(fd, cgroup, hook);
  return { fd, replaced };
}
