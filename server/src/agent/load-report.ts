/**
 * Kernel connects as load: the monotonic per-CPU counts of canopy_spill_cnt
 * turned into what each LRS interval reports, connects since the last
 * report per service and locality. Pure.
 */
import type { ClusterLoad } from '../transport/agent-lrs-client.js';
import type { ConnectCount } from './spill-table.js';

export class ConnectDeltas {
  private last = new Map<string, bigint>();

  /** Counts as they are now: what the first report's deltas start from. */
  constructor(now: readonly ConnectCount[] = []) {
    for (const c of now) this.last.set(keyOf(c), (this.last.get(keyOf(c)) ?? 0n) + c.connects);
  }

  /** Connects since the last call, per service (every one with counts, or those named) and locality. */
  next(now: readonly ConnectCount[], clusters: readonly string[] | 'all'): ClusterLoad[] {
    const totals = new Map<string, { c: ConnectCount; n: bigint }>();
    for (const c of now) {
      const k = keyOf(c);
      const held = totals.get(k);
      if (held) held.n += c.connects;
      else totals.set(k, { c, n: c.connects });
    }
    const byService = new Map<string, ClusterLoad['localities'][number][]>();
    for (const [k, { c, n }] of totals) {
      const before = this.last.get(k) ?? 0n;
      // A count that went down was deleted and created again: all of it is new.
      const delta = n >= before ? n - before : n;
      if (clusters !== 'all' && !clusters.includes(c.service)) continue;
      const list = byService.get(c.service) ?? byService.set(c.service, []).get(c.service)!;
      list.push({ locality: c.locality, requests: Number(delta) });
    }
    this.last = new Map([...totals].map(([k, { n }]) => [k, n]));
    return [...byService].map(([cluster, localities]) => ({ cluster, localities }));
  }
}

function keyOf(c: ConnectCount): string {
  return `${c.service}\u0000${c.locality.region}\u0000${c.locality.zone}\u0000${c.locality.subzone}`;
}
