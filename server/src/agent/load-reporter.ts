/**
 * The agent's load reports: one LRS stream per caller locality whose
 * connects the kernel counted. The agent's own node always reports (its
 * --node-id and locality); a --workload cgroup with a locality of its own
 * gets a stream of its own once its connects show up, with the node id
 * `NODE-ID/region/zone/subzone` and that locality, so Canopy counts its
 * connects as load offered from its tree node, as it counts them in the
 * kernel's pick.
 */
import type { Logger } from 'pino';
import type { Placement } from '../domain/locality.js';
import { AgentLrsClient } from '../transport/agent-lrs-client.js';
import type { ClientTlsMaterial } from '../transport/client-credentials.js';
import { ConnectDeltas } from './load-report.js';
import type { CountedLocality } from './spill-plan.js';
import type { ConnectCount, SpillTable } from './spill-table.js';

export interface LoadReporterOptions {
  readonly server: string;
  readonly tls?: ClientTlsMaterial;
  readonly nodeId: string;
  readonly placement: Placement;
  readonly spill: SpillTable;
  readonly log: Logger;
}

/** At most this many streams: one per caller locality on the node. */
const MAX_STREAMS = 64;

export class LoadReporter {
  private readonly streams = new Map<string, AgentLrsClient>();
  private readonly own: string;

  constructor(private readonly opts: LoadReporterOptions) {
    this.own = key(opts.placement.locality);
  }

  start(): void {
    this.open(this.opts.placement.locality, this.opts.nodeId, true);
  }

  stop(): void {
    for (const s of this.streams.values()) s.stop();
    this.streams.clear();
  }

  /** Caller localities with a stream. */
  localities(): string[] {
    return [...this.streams.keys()];
  }

  private open(locality: CountedLocality, nodeId: string, own: boolean): void {
    const at = key(locality);
    const counts = () => this.opts.spill.counts();
    // Counters of other callers' localities (and of none) are this stream's only when it is the node's own.
    const mine = (c: ConnectCount) =>
      c.client ? key(c.client) === at || (own && !this.streams.has(key(c.client))) : own;
    const deltas = new ConnectDeltas(counts().filter(mine));
    const client = new AgentLrsClient({
      server: this.opts.server,
      ...(this.opts.tls ? { tls: this.opts.tls } : {}),
      node: { id: nodeId, cluster: 'canopy-agent', locality, userAgent: 'canopy-agent' },
      collect: (clusters) => {
        const now = counts();
        if (own) this.discover(now);
        return deltas.next(now.filter(mine), clusters);
      },
      onLost: (why) => this.opts.log.debug({ why, locality: at }, 'LRS stream lost; reconnecting'),
    });
    this.streams.set(at, client);
    client.start();
  }

  /** A caller locality counted for the first time gets its own stream. */
  private discover(now: readonly ConnectCount[]): void {
    for (const c of now) {
      if (!c.client || this.streams.has(key(c.client)) || this.streams.size >= MAX_STREAMS) continue;
      const at = key(c.client);
      if (at === this.own) continue;
      this.opts.log.info({ locality: at }, 'load reports for the connects of a workload locality: a stream of its own');
      this.open(c.client, `${this.opts.nodeId}/${at}`, false);
    }
  }
}

function key(l: CountedLocality): string {
  return `${l.region}/${l.zone}/${l.subzone}`;
}
