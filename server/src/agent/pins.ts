/**
 * The pins under --pin-dir: replacing one in a single step, and removing them
 * all with the program's attachment (`canopy agent uninstall`).
 */
import { existsSync, renameSync, rmSync } from 'node:fs';
import path from 'node:path';
import { HOOK_PROGRAMS, PROGRAM } from './abi.js';
import type { BpfAddon } from './bpf.js';

/** Pins `fd` at `pin` in place of what is there, in one step (bpffs renames atomically). */
export function repin(bpf: BpfAddon, fd: number, pin: string): void {
  const tmp = `${pin}_new`; // bpffs refuses dots in names
  rmSync(tmp, { force: true });
  bpf.objPin(fd, tmp);
  renameSync(tmp, pin);
}

/** Detaches every program from the cgroup and removes the pins (the maps go with their last reference). */
export function uninstall(bpf: BpfAddon, opts: { pinDir: string; cgroup: string }): string[] {
  const done: string[] = [];
  for (const { name, hook } of [{ name: PROGRAM.connect4, hook: 4 as const }, ...HOOK_PROGRAMS]) {
    const progPin = path.join(opts.pinDir, name);
    if (!existsSync(progPin)) continue;
    const progFd = bpf.objGet(progPin);
    try {
      if (existsSync(opts.cgroup) && bpf.queryConnect4(opts.cgroup, hook).includes(bpf.progId(progFd))) {
        bpf.detachConnect4(progFd, opts.cgroup, hook);
        done.push(`detached ${typeof hook === 'number' ? `connect${hook}` : hook} from ${opts.cgroup}`);
      }
    } finally {
      bpf.close(progFd);
    }
  }
  if (existsSync(opts.pinDir)) {
    rmSync(opts.pinDir, { recursive: true, force: true });
    done.push(`removed the pins in ${opts.pinDir}`);
  }
  return done;
}
