/**
 * Kernel connects as load: the monotonic per-CPU counts of canopy_spill_cnt
 * turned into what each LRS interval reports, connects since the last
 * report per service and locality. Pure.
 */
import type { ClusterLoad } from '../transport/agent-lrs-client.js';
import type { ConnectCount } from './spill-table.js';

export class ConnectDeltas {
  /** Each counter as last seen, by its key: counts from before the agent started are never reported. */
  private last = new Map<string, bigint>();

  constructor(now: readonly ConnectCount[] = []) {
    for (const c of now) this.last.set(c.key, c.connects);
  }

  /** Connects since the last call, per service (every one with counts, or those named) and locality. */
  next(now: readonly ConnectCount[], clusters: readonly string[] | 'all'): ClusterLoad[] {
    const byService = new Map<string, Map<string, { locality: NonNullable<ConnectCount['locality']>; n: bigint }>>();
    const seen = new Map<string, bigint>();
    for (const c of now) {
      seen.set(c.key, c.connects);
      const before = this.last.get(c.key) ?? 0n;
      // A count that went down was deleted and created again: all of it is new.
      const delta = c.connects >= before ? c.connects - before : c.connects;
      if (!c.service || !c.locality || (clusters !== 'all' && !clusters.includes(c.service))) continue;
      const l = c.locality;
      const at = `${l.region}\u0000${l.zone}\u0000${l.subzone}`;
      const service = byService.get(c.service) ?? byService.set(c.service, new Map()).get(c.service)!;
      const held = service.get(at);
      if (held) held.n += delta;
      else service.set(at, { locality: l, n: delta });
    }
    this.last = seen;
    return [...byService].map(([cluster, m]) => ({
      cluster,
      localities: [...m.values()].map((v) => ({ locality: v.locality, requests: Number(v.n) })),
    }));
  }
}
