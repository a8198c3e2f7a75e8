/**
 * The kernel side of the node agent: loads and pins Canopy's BPF object,
 * attaches its connect4 program to a cgroup, and executes plans against the
 * maps. Restart-safe: maps and the program are pinned, so a new agent picks
 * up the state the last one left and the datapath keeps serving meanwhile.
 */
import { existsSync, mkdirSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { scopeValue, type Placement, type Scope } from '../domain/locality.js';
import {
  cgroupKey,
  configValue,
  DEFAULT_MAX,
  HOOK_PROGRAMS,
  LAYOUT,
  localityValue,
  MAP,
  MAX_SCOPES,
  MODE,
  PROGRAM,
  readNodeKey,
  readSvcKey,
  readSvcValue,
  readU64At,
  SCOPE_FIRST_DYNAMIC,
  sumStats,
  u32Key,
  u64Value,
  valueHash,
  type Stats,
} from './abi.js';
import { BPF_ANY, kernelTooOld, loadAddon, objectPath, type BpfAddon, type Hook } from './bpf.js';
import { cgroupId, cgroupLevel } from './cgroups.js';
import { repin, uninstall } from './pins.js';
import { FIXED_SCOPES, keyString, plan, type AgentState, type IncomingTree, type Plan, type Limits, type Published, type Rejected } from './planner.js';
import { SlotAllocator } from './slot-allocator.js';

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

export interface Workload {
  /** cgroup directory; its inode number is the kernel's cgroup id. */
  readonly cgroup: string;
  readonly placement: Placement;
}

export interface ApplyResult {
  /** Services left at their last good state, each with why (the version is NACKed with these). */
  readonly rejected: readonly Rejected[];
  readonly changed: number;
  readonly removed: number;
  readonly unchanged: number;
  readonly mapWrites: number;
  readonly ms: number;
}

export interface Entries {
  services: number;
  nodes: number;
  endpoints: number;
  workloads: number;
}

type Fds = Record<keyof typeof MAP, number>;

export class Datapath {
  private state: AgentState;
  private readonly graceMs: number;
  private readonly batchUpdates: boolean;
  private readonly retiring = new Set<NodeJS.Timeout>();
  private workloads: { id: bigint; placement: Placement }[] = [];
  /** Bit l: a workload cgroup sits at level l (what the kernel's ancestor walk looks at). */
  private workloadLevels = 0;
  private closed = false;
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
    if (old) throw new Error(old);
    const bpf = loadAddon();
    if (!existsSync(opts.cgroup) || !statSync(opts.cgroup).isDirectory()) {
      throw new Error(`--cgroup ${opts.cgroup} is not a directory (a cgroup v2 directory is required)`);
    }
    mkdirSync(opts.pinDir, { recursive: true });
    const progPin = path.join(opts.pinDir, PROGRAM.connect4);
    const testPin = path.join(opts.pinDir, PROGRAM.selectTest);
    const maxEntries: Record<string, number> = {};
    if (opts.maxEndpoints) maxEntries[MAP.endpoints] = opts.maxEndpoints;
    if (opts.maxNodes) maxEntries[MAP.nodes] = opts.maxNodes;
    if (opts.maxServices) maxEntries[MAP.services] = opts.maxServices;
    const loaded = bpf.load(opts.objectPath ?? objectPath(), opts.pinDir, maxEntries);
    const fd = (name: string, of: Readonly<Record<string, number>>) => {
      const v = of[name];
      if (v === undefined) throw new Error(`the BPF object has no ${name}`);
      return v;
    };
    let progFd = fd(PROGRAM.connect4, loaded.programs);
    let testFd = fd(PROGRAM.selectTest, loaded.programs);
    const fds = mapFds((name) => fd(name, loaded.maps));
    let replaced = false;
    if (existsSync(progPin)) {
      const pinnedFd = bpf.objGet(progPin);
      if (bpf.progTag(pinnedFd) === bpf.progTag(progFd)) {
        bpf.close(progFd);
        bpf.close(testFd);
        progFd = pinnedFd;
        testFd = existsSync(testPin) ? bpf.objGet(testPin) : (bpf.objPin(testFd, testPin), testFd);
      } else {
        if (bpf.queryConnect4(opts.cgroup).includes(bpf.progId(pinnedFd))) bpf.replaceConnect4(progFd, pinnedFd, opts.cgroup);
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
    if (!bpf.queryConnect4(opts.cgroup).includes(id)) bpf.attachConnect4(progFd, opts.cgroup);
    const hooks = HOOK_PROGRAMS.map((p) => ({ hook: p.hook, ...installHook(bpf, fd(p.name, loaded.programs), path.join(opts.pinDir, p.name), opts.cgroup, p.hook) }));
    const size = (name: string, dflt: number) => loaded.maxEntries[name] ?? dflt;
    const limits = { services: size(MAP.services, DEFAULT_MAX.services), nodes: size(MAP.nodes, DEFAULT_MAX.nodes) };
    const dp = new Datapath(bpf, fds, progFd, testFd, loaded.reused.length > 0, replaced || hooks.some((h) => h.replaced), opts, size(MAP.endpoints, DEFAULT_MAX.endpoints), limits);
    dp.hooks = hooks;
    dp.recover();
    return dp;
  }

  /** `canopy agent uninstall`: detaches the program and removes the pins; returns what it did. */
  static uninstall(opts: { pinDir: string; cgroup: string }): string[] {
    return uninstall(loadAddon(), opts);
  }

  /** Rebuilds the agent's bookkeeping from the pinned maps, and drops half-written trees. */
  private recover(): void {
    const svcVal = Buffer.alloc(LAYOUT.canopy_svc.size);
    const live = new Map<number, { key: ReturnType<typeof readSvcKey>; value: ReturnType<typeof readSvcValue>; raw: Buffer }>();
    let prev: Buffer | null = null;
    for (const [fd, size] of [
      [this.fds.services, LAYOUT.canopy_svc_key.size],
      [this.fds.services6, LAYOUT.canopy_svc_key6.size],
    ] as const) {
      const svcKeyBuf = Buffer.alloc(size);
      prev = null;
      while (this.bpf.mapNextKey(fd, prev, svcKeyBuf)) {
        const k = Buffer.from(svcKeyBuf);
        if (this.bpf.mapLookup(fd, k, svcVal)) {
          live.set(readSvcValue(svcVal).tree, { key: readSvcKey(k), value: readSvcValue(svcVal), raw: Buffer.from(svcVal) });
        }
        prev = k;
      }
    }
    // Node keys by tree; those of no live tree are leftovers of an interrupted apply.
    const byTree = new Map<number, Buffer[]>();
    const stale: Buffer[] = [];
    const nk = Buffer.alloc(LAYOUT.canopy_node_key.size);
    prev = null;
    while (this.bpf.mapNextKey(this.fds.nodes, prev, nk)) {
      const k = Buffer.from(nk);
      const tree = readNodeKey(k).tree;
      if (live.has(tree)) (byTree.get(tree) ?? byTree.set(tree, []).get(tree)!).push(k);
      else stale.push(k);
      prev = k;
    }
    for (const k of stale) this.bpf.mapDelete(this.fds.nodes, k);
    let maxTree = 0;
    for (const [tree, { key, value, raw }] of live) {
      // A network-first tree's merged layout follows its own endpoints in the same range.
      const range = { start: value.epBase, length: value.mode === MODE.networkFirst ? 2 * value.epCount : value.epCount };
      this.state.allocator.reserve(range);
      const keys = byTree.get(tree) ?? [];
      this.state.services.set(keyString(key), {
        name: '',
        key,
        tree,
        range,
        value: raw,
        slots: value.levelScope,
        nodeKeys: Buffer.concat(keys),
        nodeCount: keys.length,
        hash: '',
      });
      this.state.nodesHeld += keys.length;
      maxTree = Math.max(maxTree, tree);
    }
    this.state.nextTree = maxTree + 1;
    // Scope slots: the fixed ones, then whatever the last agent assigned (by name hash).
    const slotHashes = new Map<bigint, number>();
    const v = Buffer.alloc(8);
    for (let slot = SCOPE_FIRST_DYNAMIC; slot < MAX_SCOPES; slot++) {
      if (this.bpf.mapLookup(this.fds.scopes, u32Key(slot), v)) {
        const h = readU64At(v);
        if (h !== 0n) slotHashes.set(h, slot);
      }
    }
    this.recoveredScopeHashes = slotHashes;
  }

  /** Scope slots the last agent assigned, by the hash of the scope's name (names are not in the maps). */
  private recoveredScopeHashes = new Map<bigint, number>();

  /**
   * Sets the node's own locality (cgroup id 0) and per-cgroup workload
   * localities. A workload whose cgroup does not exist is skipped and
   * returned with the reason; the others are written.
   */
  setWorkloads(node: Placement, workloads: readonly Workload[]): { cgroup: string; reason: string }[] {
    const skipped: { cgroup: string; reason: string }[] = [];
    const entries = [{ id: 0n, placement: node }];
    let levels = 0;
    for (const w of workloads) {
      try {
        entries.push({ id: cgroupId(w.cgroup), placement: w.placement });
        const level = cgroupLevel(w.cgroup);
        if (level < 32) levels |= 1 << level;
      } catch (err) {
        skipped.push({ cgroup: w.cgroup, reason: (err as Error).message });
      }
    }
    this.workloads = entries;
    this.workloadLevels = levels >>> 0;
    // After a restart the dynamic scopes' names are known only by hash: the
    // placements name every scope a workload can have a value for.
    const names = new Set(['network', 'node', 'cluster']);
    for (const e of entries) for (const k of Object.keys(e.placement.labels)) names.add(`label:${k}`);
    this.adoptRecoveredScopes(names);
    this.writeWorkloads();
    return skipped;
  }

  /**
   * Loads these trees (full state; a service named in `keep` stays as it
   * is). A tree that cannot be loaded is left out and reported in `rejected`,
   * its service keeping its last good state. All or nothing in the kernel: if
   * a map write fails, every write of this apply is undone and it throws.
   */
  apply(trees: readonly IncomingTree[], keep: ReadonlySet<string> = new Set()): ApplyResult {
    if (this.closed) throw new Error('datapath closed');
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
      for (const f of p.fills) {
        // The endpoint slots were free: only the node entries need undoing.
        undo.push(() => this.deleteKeys(this.fds.nodes, f.nodes.keys, f.nodes.count, LAYOUT.canopy_node_key.size));
        writes += this.batch(this.fds.endpoints, f.endpoints.keys, f.endpoints.values, f.endpoints.count, 4, LAYOUT.canopy_backend.size);
        writes += this.batch(this.fds.nodes, f.nodes.keys, f.nodes.values, f.nodes.count, LAYOUT.canopy_node_key.size, LAYOUT.canopy_node.size);
      }
      // In place: endpoint slots only (planner.ts, in-place.ts).
      for (const pt of p.patches) {
        undo.push(() => this.batch(this.fds.endpoints, pt.keys, pt.previous, pt.count, 4, LAYOUT.canopy_backend.size));
        writes += this.batch(this.fds.endpoints, pt.keys, pt.values, pt.count, 4, LAYOUT.canopy_backend.size);
      }
      // The switch: one write per service.
      for (const pub of p.publish) {
        const fd = this.servicesFd(pub.key);
        this.bpf.mapUpdate(fd, pub.key, pub.value, BPF_ANY);
        const previous = pub.previous;
        undo.push(previous ? () => this.bpf.mapUpdate(fd, pub.key, previous, BPF_ANY) : () => this.bpf.mapDelete(fd, pub.key));
        writes++;
      }
      for (const u of p.unpublish) {
        const fd = this.servicesFd(u.key);
        this.bpf.mapDelete(fd, u.key);
        undo.push(() => this.bpf.mapUpdate(fd, u.key, u.previous, BPF_ANY));
        writes++;
      }
    } catch (err) {
      for (const step of undo.reverse()) step();
      throw err;
    }
    this.state = p.next;
    this.scheduleRetire(p.retire);
    return {
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
      endpoints += s.range.length;
    }
    return { services: this.state.services.size, nodes, endpoints, workloads: this.workloads.length };
  }

  stats(): Stats {
    const cpus = this.bpf.possibleCpus();
    const v = Buffer.alloc(cpus * LAYOUT.canopy_stats.size);
    if (!this.bpf.mapLookup(this.fds.stats, u32Key(0), v)) return { connects: 0n, rewritten: 0n, refused: 0n, lookups: 0n };
    return sumStats(v, cpus);
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
    for (const fd of [...Object.values(this.fds), this.progFd, ...this.hooks.map((h) => h.fd), this.testProgFd]) this.bpf.close(fd);
  }

  /** Takes back the slots of recovered scopes by name; true when one was taken (workload entries need it). */
  private adoptRecoveredScopes(names: Iterable<string>): boolean {
    let adopted = false;
    if (this.recoveredScopeHashes.size === 0) return adopted;
    for (const scope of names) {
      if (FIXED_SCOPES.has(scope) || this.state.scopes.has(scope)) continue;
      const slot = this.recoveredScopeHashes.get(valueHash(scope));
      if (slot === undefined || [...this.state.scopes.values()].includes(slot)) continue;
      this.state.scopes.set(scope, slot);
      adopted = true;
    }
    return adopted;
  }

  private writeWorkloads(scopes: ReadonlyMap<string, number> = this.state.scopes): number {
    const all = new Map<string, number>([...FIXED_SCOPES, ...scopes]);
    const keep = new Set<bigint>();
    for (const w of this.workloads) {
      const values = new Map<number, bigint>();
      for (const [scope, slot] of all) values.set(slot, valueHash(scopeValue(scope as Scope, w.placement)));
      this.bpf.mapUpdate(this.fds.workloads, cgroupKey(w.id), localityValue(values), BPF_ANY);
      keep.add(w.id);
    }
    // The agent owns the map: drop entries of workloads no longer configured.
    const k = Buffer.alloc(8);
    const drop: Buffer[] = [];
    let prev: Buffer | null = null;
    while (this.bpf.mapNextKey(this.fds.workloads, prev, k)) {
      const key = Buffer.from(k);
      if (!keep.has(readU64At(key))) drop.push(key);
      prev = key;
    }
    for (const key of drop) this.bpf.mapDelete(this.fds.workloads, key);
    // Levels last: an ancestor walk never looks for an entry not yet written.
    this.bpf.mapUpdate(this.fds.config, u32Key(0), configValue(this.workloadLevels), BPF_ANY);
    return this.workloads.length + drop.length + 1;
  }

  /** canopy_services, or canopy_services6 for an IPv6 key. */
  private servicesFd(key: Buffer): number {
    return key.length === LAYOUT.canopy_svc_key6.size ? this.fds.services6 : this.fds.services;
  }

  private batch(fd: number, keys: Buffer, values: Buffer, count: number, ks: number, vs: number): number {
    if (count === 0) return 0;
    try {
      if (!this.batchUpdates) throw Object.assign(new Error('batch updates off'), { code: 'ENOTSUPP' });
      this.bpf.mapUpdateBatch(fd, keys, values, count, BPF_ANY);
    } catch (err) {
      const code = (err as { code?: string }).code;
      if (code !== 'EINVAL' && code !== 'ENOTSUPP' && code !== 'ENOTSUP') throw err;
      // A kernel without batch ops for this map type: one write per entry.
      for (let i = 0; i < count; i++) {
        this.bpf.mapUpdate(fd, keys.subarray(i * ks, (i + 1) * ks), values.subarray(i * vs, (i + 1) * vs), BPF_ANY);
      }
    }
    return count;
  }

  private deleteKeys(fd: number, keys: Buffer, count: number, ks: number): void {
    for (let i = 0; i < count; i++) this.bpf.mapDelete(fd, keys.subarray(i * ks, (i + 1) * ks));
  }

  private scheduleRetire(retire: readonly Published[]): void {
    if (retire.length === 0) return;
    const timer = setTimeout(() => {
      this.retiring.delete(timer);
      if (this.closed) return;
      for (const r of retire) {
        if (r.nodeCount > 0) {
          try {
            this.bpf.mapDeleteBatch(this.fds.nodes, r.nodeKeys, r.nodeCount);
          } catch {
            this.deleteKeys(this.fds.nodes, r.nodeKeys, r.nodeCount, LAYOUT.canopy_node_key.size);
          }
        }
        this.state.allocator.release(r.range);
        this.state.nodesHeld -= r.nodeCount;
      }
    }, this.graceMs);
    this.retiring.add(timer);
  }
}

/**
 * Pins and attaches a program on its cgroup hook as open() does connect4: a
 * pinned program of the same build is kept, one of another build is swapped
 * for this one in a single step (BPF_F_REPLACE).
 */
function installHook(bpf: BpfAddon, fd: number, pin: string, cgroup: string, hook: Hook): { fd: number; replaced: boolean } {
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

function mapFds(get: (name: string) => number): Fds {
  return {
    services: get(MAP.services),
    services6: get(MAP.services6),
    nodes: get(MAP.nodes),
    endpoints: get(MAP.endpoints),
    workloads: get(MAP.workloads),
    scopes: get(MAP.scopes),
    stats: get(MAP.stats),
    peers: get(MAP.peers),
    config: get(MAP.config),
  };
}

export { cgroupId, cgroupLevel };
