/**
 * canopy_spill and canopy_spill_cnt, the load-aware maps: writes each
 * load-aware tree's spill entries (only those that changed), deletes those of
 * services gone or no longer load aware, and reads the per-CPU connect
 * counts by service and node. Opened from the pins the Datapath made, so the
 * Datapath's own apply is left as it is.
 */
import path from 'node:path';
import type { IncomingTree } from './planner.js';
import type { TreeMessage } from '../resources/tree-codec.js';
import { readCountKey, SPILL_LAYOUT, SPILL_MAP, sumPerCpu } from './abi-spill.js';
import { BPF_ANY, type BpfAddon } from './bpf.js';
import { localitiesOf, serviceId, spillEntries, type CountedLocality } from './spill-plan.js';

export interface ConnectCount {
  /** The counter's key (hex): a service and a node. */
  readonly key: string;
  /** The service, the locality picked and the caller's node's locality; absent while no loaded tree names them. */
  readonly service?: string;
  readonly locality?: CountedLocality;
  readonly client?: CountedLocality;
  /** Connects counted since the entry was created (monotonic). */
  readonly connects: bigint;
}

export class SpillTable {
  /** serviceId (VIP and port: a dual-stack service has two) → its name and key hex → value hex, as written. */
  private readonly written = new Map<string, { service: string; entries: Map<string, string> }>();
  /** Load-aware trees by serviceId, for reading the counts. */
  private readonly trees = new Map<string, { tree: TreeMessage; localities: Map<string, CountedLocality> }>();
  private first = true;
  private writes = 0;

  private constructor(
    private readonly bpf: BpfAddon,
    private readonly spillFd: number,
    private readonly countFd: number,
  ) {}

  /** From the pins under `pinDir`; undefined when the object has no load-aware maps. */
  static open(bpf: BpfAddon, pinDir: string): SpillTable | undefined {
    try {
      return new SpillTable(
        bpf,
        bpf.objGet(path.join(pinDir, SPILL_MAP.spill)),
        bpf.objGet(path.join(pinDir, SPILL_MAP.counts)),
      );
    } catch {
      return undefined;
    }
  }

  /** Map writes and deletes made so far. */
  get mapWrites(): number {
    return this.writes;
  }

  /**
   * Brings the spill entries in line with `trees` (full state), leaving the
   * services in `skip` (rejected, or not decoded) as they are.
   */
  sync(trees: readonly IncomingTree[], skip: ReadonlySet<string>): void {
    const ks = SPILL_LAYOUT.canopy_spill_key.size;
    const seen = new Set<string>();
    const live = new Map<string, { tree: TreeMessage; localities: Map<string, CountedLocality> }>();
    for (const { tree } of trees) {
      if (skip.has(tree.service)) continue;
      const id = serviceId(tree);
      seen.add(id);
      const held = this.written.get(id)?.entries ?? new Map<string, string>();
      const next = new Map<string, string>();
      for (const e of spillEntries(tree)) {
        const k = e.key.toString('hex');
        const v = e.value.toString('hex');
        next.set(k, v);
        if (held.get(k) !== v) {
          this.bpf.mapUpdate(this.spillFd, e.key, e.value, BPF_ANY);
          this.writes++;
        }
      }
      for (const k of held.keys()) if (!next.has(k)) this.delete(k);
      if (next.size > 0) this.written.set(id, { service: tree.service, entries: next });
      else this.written.delete(id);
      if (tree.loadAware) {
        const prev = this.trees.get(serviceId(tree));
        live.set(serviceId(tree), prev?.tree === tree ? prev : { tree, localities: localitiesOf(tree) });
      }
    }
    for (const [id, held] of this.written) {
      if (seen.has(id) || skip.has(held.service)) continue;
      for (const k of held.entries.keys()) this.delete(k);
      this.written.delete(id);
    }
    // After a restart: entries a previous agent left that no tree asks for.
    if (this.first) {
      this.first = false;
      const wanted = new Set([...this.written.values()].flatMap((m) => [...m.entries.keys()]));
      for (const k of this.keys(this.spillFd, ks)) if (!wanted.has(k.toString('hex'))) this.delete(k.toString('hex'));
    }
    for (const [id, t] of this.trees) if (!live.has(id) && !skip.has(t.tree.service)) this.forgetCounts(id);
    for (const id of [...this.trees.keys()]) if (!live.has(id)) this.trees.delete(id);
    for (const [id, t] of live) this.trees.set(id, t);
  }

  /** Every counter: connects per load-aware service and node (the chosen leaf, else the caller's matched node). */
  counts(): ConnectCount[] {
    const cpus = this.bpf.possibleCpus();
    const value = Buffer.alloc(8 * cpus);
    const out: ConnectCount[] = [];
    for (const k of this.keys(this.countFd, SPILL_LAYOUT.canopy_spill_cnt_key.size)) {
      const { target, client } = readCountKey(k);
      const t = this.trees.get(serviceId(target));
      const locality = t?.localities.get(`${target.level}/${target.path}`);
      const from = t?.localities.get(`${client.level}/${client.path}`);
      if (!this.bpf.mapLookup(this.countFd, k, value)) continue;
      const connects = sumPerCpu(value, cpus);
      const known = t && locality && from ? { service: t.tree.service, locality, client: from } : {};
      out.push({ key: k.toString('hex'), ...known, connects });
    }
    return out;
  }

  close(): void {
    this.bpf.close(this.spillFd);
    this.bpf.close(this.countFd);
  }

  private delete(hex: string): void {
    this.bpf.mapDelete(this.spillFd, Buffer.from(hex, 'hex'));
    this.writes++;
  }

  /** A service no longer load aware (or gone): its counts go. */
  private forgetCounts(id: string): void {
    for (const k of this.keys(this.countFd, SPILL_LAYOUT.canopy_spill_cnt_key.size)) {
      if (serviceId(readCountKey(k).target) === id) this.bpf.mapDelete(this.countFd, k);
    }
  }

  private keys(fd: number, size: number): Buffer[] {
    const out: Buffer[] = [];
    const k = Buffer.alloc(size);
    let prev: Buffer | null = null;
    while (this.bpf.mapNextKey(fd, prev, k)) {
      prev = Buffer.from(k);
      out.push(prev);
    }
    return out;
  }
}
