/**
 * The kernel side of the node agent: loads and pins Canopy's BPF object,
 * attaches its connect4 program to a cgroup, and executes plans against the
 * maps. Restart-safe: maps and the program are pinned, so a new agent picks
 * up the state the last one left and the datapath keeps serving meanwhile.
 */
import { existsSync, mkdirSync, readdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import os from 'node:os';
import { type Placement } from '../domain/locality.js';
import {
  DEFAULT_MAX,
  LAYOUT,
  MAP,
  PROGRAM,
  RETIRED_MAPS,
  sumStats,
  svcKey,
  u32Key,
  u64Value,
  valueHash,
  type Stats,
} from './abi.js';
import { BPF_ANY, kernelTooOld, loadAddon, objectPath, type BpfAddon, type Hook } from './bpf.js';
import { assertCgroupDir, cgroupId, cgroupLevel } from './cgroups.js';
import { reproject, samePlacement } from './here-bucket.js';
import { deleteKeys, mapFds, servicesFd, switchServices, writeFill, writeInOrder, type Fds } from './map-writes.js';
import { uninstall } from './pins.js';
import {
  plan,
  type AgentState,
  type IncomingTree,
  type Limits,
  type Plan,
  type Published,
  type Rejected,
} from './planner.js';
import { installPrograms } from './programs.js';
import { adoptRecoveredScopes, recoverState } from './recover.js';
import { releaseAll, SlotAllocator, type Range } from './slot-allocator.js';
import {
  placementScopes,
  resolveWorkloads,
  writeWorkloads,
  type Workload,
  type WorkloadEntry,
} from './workload-entries.js';
import { CodedError } from '../domain/errors.js';

export type { Workload };

export interface DatapathOptions {
  /** bpffs directory for pins, e.g. /sys/fs/bpf/canopy */
  readonly pinDir: string;
  /** cgroup v2 directory the connect4 program is attached to. */
  readonly cgroup: string;
  /** How long a retired tree's entries stay after the switch (default 200 ms). */
  readonly graceMs?: number;
  readonly maxEndpoints?: number;
  readonly maxNodes?: number;
  readonly maxServices?: number;
  /** The BPF object to load (default: the one `npm run build:bpf` built). */
  readonly objectPath?: string;
  /** Fill maps with batch updates (default); false writes one entry per syscall (the bench's baseline). */
  readonly batchUpdates?: boolean;
}

export interface ApplyResult {
  /** Services left at their last good state, each with why (the version is NACKed with these). */
  readonly rejected: readonly Rejected[];
  readonly changed: number;
  readonly removed: number;
  readonly unchanged: number;
  readonly mapWrites: number;
  readonly ms: number;
  /**
   * Some service was rejected for want of room while retired trees still
   * hold theirs: the same trees applied again after this many ms may load.
   */
  readonly retryAfterMs?: number;
}

export interface Entries {
  services: number;
  nodes: number;
  endpoints: number;
  workloads: number;
}

export class Datapath {
  private state: AgentState;
  private readonly graceMs: number;
  private readonly pinDir: string;
  private readonly cgroup: string;
  private readonly batchUpdates: boolean;
  private readonly retiring = new Set<NodeJS.Timeout>();
  private workloads: WorkloadEntry[] = [];
  /** Bit l: a workload cgroup sits at level l (what the kernel's ancestor walk looks at). */
  private workloadLevels = 0;
  private closed = false;
  /** Scope slots the last agent assigned, by the hash of the scope's name (names are not in the maps). */
  private recoveredScopeHashes = new Map<bigint, number>();

  /** connect6 (IPv6 VIPs), getpeername4/6 and recvmsg4/6 (the peer is the VIP). */
  private hooks: { fd: number; hook: Hook }[] = [];

  private constructor(
    private readonly bpf: BpfAddon,
    private readonly fds: Fds,
    readonly progFd: number,
    readonly testProgFd: number,
    readonly resumed: boolean,
    /** A pinned program of another build was swapped for this one. */
    readonly replaced: boolean,
    opts: DatapathOptions,
    capacity: number,
    limits: Limits,
  ) {
    this.graceMs = opts.graceMs ?? 200;
    this.pinDir = opts.pinDir;
    this.cgroup = opts.cgroup;
    this.batchUpdates = opts.batchUpdates ?? true;
    this.state = {
      services: new Map(),
      allocator: new SlotAllocator(capacity),
      nextTree: 1,
      scopes: new Map(),
      nodesHeld: 0,
      limits,
    };
  }

  /**
   * Opens the datapath: loads the object, reusing the maps pinned in
   * `pinDir` (a restart keeps the state), and attaches connect4 to the cgroup.
   * A pinned program from the same build is kept; one from another build is
   * swapped for this one in a single step (BPF_F_REPLACE) and re-pinned.
   */
  static open(opts: DatapathOptions): Datapath {
    const old = kernelTooOld(os.release());
    if (old) throw new CodedError('CANOPY_DATAPATH_UNAVAILABLE', old);
    const bpf = loadAddon();
    assertCgroupDir(opts.cgroup);
    // Nothing pinned yet: if the install fails halfway, whatever it pinned or attached is undone.
    const fresh = !existsSync(opts.pinDir) || readdirSync(opts.pinDir).length === 0;
    mkdirSync(opts.pinDir, { recursive: true });
    try {
      return Datapath.install(bpf, opts);
    } catch (err) {
      if (fresh) uninstall(bpf, { pinDir: opts.pinDir, cgroup: opts.cgroup });
      throw err;
    }
  }

  private static install(bpf: BpfAddon, opts: DatapathOptions): Datapath {
    const maxEntries: Record<string, number> = {};
    if (opts.maxEndpoints) maxEntries[MAP.endpoints] = opts.maxEndpoints;
    if (opts.maxNodes) maxEntries[MAP.nodes] = opts.maxNodes;
    if (opts.maxServices) maxEntries[MAP.services] = opts.maxServices;
    const loaded = bpf.load(opts.objectPath ?? objectPath(), opts.pinDir, maxEntries);
    const fd = (name: string, of: Readonly<Record<string, number>>) => {
      const v = of[name];
      if (v === undefined) throw new CodedError('CANOPY_DATAPATH_UNAVAILABLE', `the BPF object has no ${name}`);
      return v;
    };
    const fds = mapFds((name) => fd(name, loaded.maps));
    const progs = installPrograms(bpf, (name) => fd(name, loaded.programs), opts.pinDir, opts.cgroup);
    const size = (name: string, dflt: number) => loaded.maxEntries[name] ?? dflt;
    const limits = { services: size(MAP.services, DEFAULT_MAX.services), nodes: size(MAP.nodes, DEFAULT_MAX.nodes) };
    const dp = new Datapath(
      bpf,
      fds,
      progs.progFd,
      progs.testFd,
      loaded.reused.length > 0,
      progs.replaced,
      opts,
      size(MAP.endpoints, DEFAULT_MAX.endpoints),
      limits,
    );
    dp.hooks = progs.hooks;
    // The programs that used a retired map have been replaced: its pin goes with them.
    for (const name of RETIRED_MAPS) rmSync(path.join(opts.pinDir, name), { force: true });
    dp.recoveredScopeHashes = recoverState(bpf, fds, dp.state);
    return dp;
  }

  /** `canopy agent uninstall`: detaches the program and removes the pins; returns what it did. */
  static uninstall(opts: { pinDir: string; cgroup: string }): string[] {
    return uninstall(loadAddon(), opts);
  }

  /**
   * Sets the node's own locality (cgroup id 0) and per-cgroup workload
   * localities. A workload whose cgroup does not exist is skipped and
   * returned with the reason; the others are written.
   */
  setWorkloads(node: Placement, workloads: readonly Workload[]): { cgroup: string; reason: string }[] {
    const { entries, levels, skipped } = resolveWorkloads(node, workloads);
    this.workloads = entries;
    this.workloadLevels = levels;
    this.adoptRecoveredScopes(placementScopes(entries));
    this.writeWorkloads();
    this.projectNode(node);
    return skipped;
  }

  /**
   * The node's own deepest bucket in every service value (here-bucket.ts),
   * once canopy_nodeloc holds its new locality; a connect in between picks
   * from the old locality's bucket, as it did a moment before.
   */
  private projectNode(node: Placement): void {
    if (samePlacement(this.state.node, node)) return;
    this.state.node = node;
    for (const [ks, p] of this.state.services) {
      const [w] = reproject([{ key: svcKey(p.key), value: p.value, layout: p.layout }], node);
      if (!w) continue;
      this.bpf.mapUpdate(servicesFd(this.fds, w.key), w.key, w.value, BPF_ANY);
      this.state.services.set(ks, { ...p, value: w.value });
    }
  }

  /**
   * Loads these trees (full state; a service named in `keep` stays as it
   * is). A tree that cannot be loaded is left out and reported in `rejected`,
   * its service keeping its last good state. All or nothing in the kernel: if
   * a map write fails, every write of this apply is undone and it throws.
   */
  apply(trees: readonly IncomingTree[], keep: ReadonlySet<string> = new Set()): ApplyResult {
    if (this.closed) throw new CodedError('CANOPY_DATAPATH_UNAVAILABLE', 'datapath closed');
    const started = process.hrtime.bigint();
    const adopted = this.adoptRecoveredScopes(trees.flatMap((t) => t.tree.scopes));
    const p = plan(this.state, trees, keep);
    let writes = 0;
    const undo: (() => void)[] = [];
    try {
      for (const { scope, slot } of p.newScopes) {
        const key = u32Key(slot);
        const was = Buffer.alloc(8);
        this.bpf.mapLookup(this.fds.scopes, key, was);
        this.bpf.mapUpdate(this.fds.scopes, key, u64Value(valueHash(scope)), BPF_ANY);
        undo.push(() => this.bpf.mapUpdate(this.fds.scopes, key, was, BPF_ANY));
        writes++;
      }
      if (p.newScopes.length > 0 || adopted) {
        undo.push(() => this.writeWorkloads());
        writes += this.writeWorkloads(p.next.scopes);
      }
      for (const f of p.fills) writes += writeFill(this.bpf, this.fds, this.batchUpdates, f, undo);
      // Edited in (layout-edit.ts): slots, then node entries, then the service entry, in order.
      for (const pt of p.patches) writes += writeInOrder(this.bpf, this.fds, this.batchUpdates, pt.writes, undo);
      writes += switchServices(this.bpf, this.fds, p, undo);
    } catch (err) {
      for (const step of undo.reverse()) step();
      throw err;
    }
    // Room held by trees retired before this apply (or by this one) comes back within a grace period.
    const retryable = p.rejected.some((r) => r.capacity) && (this.retiring.size > 0 || p.retire.length > 0);
    this.state = p.next;
    this.scheduleRetire(
      p.retire,
      p.patches.flatMap((pt) => pt.retire),
    );
    return {
      ...(retryable ? { retryAfterMs: this.graceMs + 50 } : {}),
      rejected: p.rejected,
      changed: p.publish.length + p.patches.length,
      removed: p.unpublish.length,
      unchanged: p.unchanged,
      mapWrites: writes,
      ms: Number(process.hrtime.bigint() - started) / 1e6,
    };
  }

  /** Plans without executing (the agent's dry run and tests). */
  plan(trees: readonly IncomingTree[]): Plan {
    return plan(this.state, trees);
  }

  services(): Published[] {
    return [...this.state.services.values()];
  }

  entries(): Entries {
    let nodes = 0;
    let endpoints = 0;
    for (const s of this.state.services.values()) {
      nodes += s.nodeCount;
      for (const r of s.ranges) endpoints += r.length;
    }
    return { services: this.state.services.size, nodes, endpoints, workloads: this.workloads.length };
  }

  stats(): Stats {
    const cpus = this.bpf.possibleCpus();
    const v = Buffer.alloc(cpus * LAYOUT.canopy_stats.size);
    if (!this.bpf.mapLookup(this.fds.stats, u32Key(0), v))
      return { connects: 0n, rewritten: 0n, refused: 0n, lookups: 0n };
    return sumStats(v, cpus);
  }

  /**
   * Why this datapath no longer serves (its connect4 program was detached
   * from the cgroup, or its pins removed: `canopy agent uninstall`), or
   * undefined while it is installed.
   */
  uninstalledBecause(): string | undefined {
    if (this.closed) return undefined;
    if (!existsSync(path.join(this.pinDir, PROGRAM.connect4))) return `its pins in ${this.pinDir} were removed`;
    try {
      if (!this.bpf.queryConnect4(this.cgroup).includes(this.bpf.progId(this.progFd)))
        return `its program was detached from ${this.cgroup}`;
    } catch (err) {
      return `its cgroup ${this.cgroup} cannot be queried: ${(err as Error).message}`;
    }
    return undefined;
  }

  /** The fd of the program on `hook` (4: connect4), for its run-time counters. */
  programFd(hook: Hook): number | undefined {
    return hook === 4 ? this.progFd : this.hooks.find((h) => h.hook === hook)?.fd;
  }

  /** Runs the selection in the kernel through BPF_PROG_TEST_RUN (canopy_select_test). */
  testRun(ctx: Buffer): Buffer {
    this.bpf.testRun(this.testProgFd, ctx);
    return ctx;
  }

  /** Waits for every retired tree to be freed. */
  async settle(): Promise<void> {
    while (this.retiring.size > 0) await new Promise((r) => setTimeout(r, Math.min(50, this.graceMs)));
  }

  /**
   * Stops the agent's side. The datapath keeps serving from the pinned maps
   * unless `detach`, which detaches the program (the pins stay: see uninstall).
   */
  close(opts: { detach?: boolean; cgroup?: string; pinDir?: string } = {}): void {
    if (this.closed) return;
    this.closed = true;
    for (const t of this.retiring) clearTimeout(t);
    this.retiring.clear();
    if (opts.detach && opts.cgroup) {
      try {
        this.bpf.detachConnect4(this.progFd, opts.cgroup);
        for (const h of this.hooks) this.bpf.detachConnect4(h.fd, opts.cgroup, h.hook);
      } catch {
        // already detached
      }
    }
    for (const fd of [...Object.values(this.fds), this.progFd, ...this.hooks.map((h) => h.fd), this.testProgFd])
      this.bpf.close(fd);
  }

  /** Takes back the slots of recovered scopes by name; true when one was taken (workload entries need it). */
  private adoptRecoveredScopes(names: Iterable<string>): boolean {
    return adoptRecoveredScopes(this.recoveredScopeHashes, this.state.scopes, names);
  }

  private writeWorkloads(scopes: ReadonlyMap<string, number> = this.state.scopes): number {
    return writeWorkloads(this.bpf, this.fds, this.workloads, this.workloadLevels, scopes);
  }

  private scheduleRetire(retire: readonly Published[], ranges: readonly Range[] = []): void {
    if (retire.length === 0 && ranges.length === 0) return;
    const timer = setTimeout(() => {
      this.retiring.delete(timer);
      if (this.closed) return;
      for (const r of retire) {
        if (r.nodeCount > 0) {
          try {
            this.bpf.mapDeleteBatch(this.fds.nodes, r.nodeKeys, r.nodeCount);
          } catch {
            deleteKeys(this.bpf, this.fds.nodes, r.nodeKeys, r.nodeCount, LAYOUT.canopy_node_key.size);
          }
        }
        this.state.nodesHeld -= r.nodeCount;
      }
      releaseAll(this.state.allocator, [...retire.flatMap((r) => r.ranges), ...ranges]);
    }, this.graceMs);
    this.retiring.add(timer);
  }
}

export { cgroupId, cgroupLevel };
