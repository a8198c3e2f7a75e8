/**
 * What clients report they send (LRS): a smoothed view of the load offered by
 * each reporting client, per service, and of the load landing on each backend
 * locality. Each report replaces the reporter's previous interval; a service
 * a reporter stops naming counts as zero from it, and a reporter that goes
 * quiet for `staleAfterMs` stops counting at all. Pure: time is passed in.
 */
import { smooth } from './load-damper.js';
import { formatLocality, type Locality, type Placement } from '../locality.js';

export interface UpstreamLoad {
  readonly locality: Locality;
  /** Requests issued to this locality during the interval. */
  readonly issued: number;
  readonly succeeded: number;
  readonly errors: number;
  readonly inProgress: number;
}

export interface ServiceLoadReport {
  readonly service: string;
  readonly intervalSeconds: number;
  readonly upstream: readonly UpstreamLoad[];
  /**
   * Requests dropped before a locality was chosen (Envoy counts those with no healthy upstream): load the
   * client offered that landed nowhere. Absent: none.
   */
  readonly dropped?: number;
}

interface ReporterState {
  client: Placement;
  lastSeen: number;
  /** service → smoothed requests/s offered, and per backend locality key. */
  readonly offered: Map<string, number>;
  readonly landed: Map<string, Map<string, number>>;
}

export interface OfferedLoad {
  readonly reporter: string;
  readonly client: Placement;
  readonly rps: number;
}

export class LoadView {
  private readonly reporters = new Map<string, ReporterState>();

  /**
   * Rising load counts faster than falling load (`alphaUp` > `alphaDown`):
   * an overload is relieved within a few intervals, and a spill that is no
   * longer needed drains back gradually.
   */
  constructor(
    private readonly staleAfterMs = 30_000,
    private readonly alphaUp = 0.8,
    private readonly alphaDown = 0.4,
  ) {}

  private smooth(previous: number | undefined, report: number): number {
    return smooth(previous, report, previous !== undefined && report < previous ? this.alphaDown : this.alphaUp);
  }

  /** One LRS report of a reporter (a client's LRS stream): every service it sends to, this interval. */
  record(reporter: string, client: Placement, reports: readonly ServiceLoadReport[], now: number): void {
    let s = this.reporters.get(reporter);
    if (!s) this.reporters.set(reporter, (s = { client, lastSeen: now, offered: new Map(), landed: new Map() }));
    s.client = client;
    s.lastSeen = now;
    const named = new Set<string>();
    for (const r of reports) {
      const secs = r.intervalSeconds > 0 ? r.intervalSeconds : 1;
      named.add(r.service);
      let total = Math.max(0, r.dropped ?? 0) / secs;
      const landedNow = new Map<string, number>();
      for (const u of r.upstream) {
        const rps = Math.max(0, u.issued) / secs;
        total += rps;
        const k = formatLocality(u.locality);
        landedNow.set(k, (landedNow.get(k) ?? 0) + rps);
      }
      s.offered.set(r.service, this.smooth(s.offered.get(r.service), total));
      const held = s.landed.get(r.service) ?? new Map<string, number>();
      for (const k of new Set([...held.keys(), ...landedNow.keys()]))
        held.set(k, this.smooth(held.get(k), landedNow.get(k) ?? 0));
      s.landed.set(r.service, held);
    }
    // A service this reporter no longer names sent nothing this interval.
    for (const [service, rps] of s.offered) {
      if (named.has(service)) continue;
      s.offered.set(service, this.smooth(rps, 0));
      const held = s.landed.get(service);
      if (held) for (const [k, v] of held) held.set(k, this.smooth(v, 0));
    }
  }

  forget(reporter: string): void {
    this.reporters.delete(reporter);
  }

  /** The live reporters' offered load to one service. */
  offered(service: string, now: number): OfferedLoad[] {
    const out: OfferedLoad[] = [];
    for (const [reporter, s] of this.reporters) {
      if (now - s.lastSeen > this.staleAfterMs) continue;
      const rps = s.offered.get(service);
      if (rps !== undefined) out.push({ reporter, client: s.client, rps });
    }
    return out;
  }

  /** Load landing on each backend locality of one service ("region/zone/subzone" → requests/s), from every live reporter. */
  landed(service: string, now: number): Map<string, number> {
    const out = new Map<string, number>();
    for (const s of this.reporters.values()) {
      if (now - s.lastSeen > this.staleAfterMs) continue;
      for (const [k, v] of s.landed.get(service) ?? []) out.set(k, (out.get(k) ?? 0) + v);
    }
    return out;
  }

  /** Drops reporters quiet for longer than the stale limit. */
  prune(now: number): void {
    for (const [k, s] of this.reporters) if (now - s.lastSeen > this.staleAfterMs) this.reporters.delete(k);
  }

  get size(): number {
    return this.reporters.size;
  }
}
