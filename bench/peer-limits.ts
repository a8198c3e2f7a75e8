/**
 * Bounds of the peer benchmark (peer.ts) at ten thousand streams: enough file descriptors for the server
 * that holds them (Go raises its own soft limit to the hard one; Node does not), and a floor under the
 * machine's available memory, below which a pass stops instead of pushing a shared machine into its
 * OOM killer (2,000 × 256 KB responses cost go-control-plane 1.6 MB per stream at the peak).
 */
import { readFileSync } from 'node:fs';

/** The hard limit on open files of this process (children inherit it). */
export function hardFdLimit(): number {
  const line = readFileSync('/proc/self/limits', 'utf8')
    .split('\n')
    .find((l) => l.startsWith('Max open files'));
  const hard = line?.trim().split(/\s+/)[4];
  return hard === undefined || hard === 'unlimited' ? Infinity : Number(hard);
}

/**
 * A command run with its soft limit on open files raised to `need` (through the shell's `ulimit`, which
 * may raise it up to the hard limit); throws, saying what to do, when the hard limit is lower.
 */
export function withFdLimit(file: string, args: readonly string[], need: number): [string, string[]] {
  const hard = hardFdLimit();
  if (hard < need) {
    throw new Error(
      `${need} open files needed (streams plus a margin); the hard limit is ${hard}: raise it (ulimit -Hn) and rerun`,
    );
  }
  return ['sh', ['-c', 'ulimit -n "$0" && exec "$@"', String(need), file, ...args]];
}

/** MemAvailable in MB (/proc/meminfo). */
export function availableMB(): number {
  const m = /MemAvailable:\s+(\d+) kB/.exec(readFileSync('/proc/meminfo', 'utf8'));
  return m ? Number(m[1]) / 1024 : Infinity;
}

/** The machine ran short of memory during a pass: the pass was stopped, and the section with it. */
export class MemoryFloor extends Error {
  readonly code = 'PEER_MEMORY_FLOOR';
}

/**
 * Watches MemAvailable while a pass runs; below `floorMB` it calls `stop` (which ends the load) once and
 * `tripped` rejects. `race` makes any wait of the pass end with it.
 */
export class MemoryGuard {
  private timer: NodeJS.Timeout;
  private fail: ((e: Error) => void) | undefined;
  readonly tripped: Promise<never>;
  lowestMB = Infinity;

  constructor(floorMB: number, what: string, stop: () => void) {
    this.tripped = new Promise<never>((_, reject) => (this.fail = reject));
    this.tripped.catch(() => {});
    this.timer = setInterval(() => {
      const mb = availableMB();
      this.lowestMB = Math.min(this.lowestMB, mb);
      if (mb >= floorMB || !this.fail) return;
      stop();
      this.fail(
        new MemoryFloor(`${what}: stopped with ${Math.round(mb)} MB available, under the floor of ${floorMB} MB`),
      );
      this.fail = undefined;
    }, 250);
  }

  race<T>(p: Promise<T>): Promise<T> {
    return Promise.race([p, this.tripped]);
  }

  close(): void {
    clearInterval(this.timer);
  }
}
