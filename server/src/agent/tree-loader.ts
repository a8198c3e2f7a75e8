/**
 * The agent's side of the ADS stream: each tree version is loaded into the
 * BPF maps through the Datapath, and ACKed only once it is there (NACKed,
 * with the reason, when part of it cannot be loaded). Keeps the status the
 * agent reports and resolves those waiting for a version.
 */
import type { Logger } from 'pino';
import { AgentAdsClient, type AdsResource, type AdsVerdict } from '../transport/agent-ads-client.js';
import { TREE_TYPE } from '../resources/type-urls.js';
import type { AgentOptions } from './agent-options.js';
import type { AgentMetrics } from './agent-metrics.js';
import type { Datapath } from './datapath.js';
import type { SpillTable } from './spill-table.js';
import { TreeInbox } from './tree-inbox.js';

export interface AgentStatus {
  readonly connected: boolean;
  readonly versionApplied: string;
  readonly versionsApplied: number;
  readonly nacks: number;
  readonly lastNack?: { version: string; detail: string };
}

type MutableStatus = { -readonly [K in keyof AgentStatus]: AgentStatus[K] };

export class TreeLoader {
  private readonly state: MutableStatus = { connected: false, versionApplied: '', versionsApplied: 0, nacks: 0 };
  private readonly waiters: { version: string | undefined; resolve: (v: string) => void }[] = [];
  private readonly inbox = new TreeInbox();

  constructor(
    private readonly datapath: Datapath,
    private readonly spill: SpillTable | undefined,
    private readonly metrics: AgentMetrics,
    private readonly log: Logger,
  ) {}

  status(): AgentStatus {
    return { ...this.state };
  }

  /** Resolves once `version` (or, with no argument, any version) has been applied. */
  applied(version?: string): Promise<string> {
    return version !== undefined && this.state.versionApplied === version
      ? Promise.resolve(version)
      : new Promise((resolve) => this.waiters.push({ version, resolve }));
  }

  /** The ADS client that feeds this loader, not started. */
  client(opts: AgentOptions): AgentAdsClient {
    return new AgentAdsClient({
      server: opts.server,
      ...(opts.tls ? { tls: opts.tls } : {}),
      node: { id: opts.nodeId, cluster: 'canopy-agent', locality: opts.placement.locality, userAgent: 'canopy-agent' },
      typeUrl: TREE_TYPE,
      onResponse: (version, resources, again) => this.onResponse(version, resources, again),
      onConnected: (first) => {
        this.state.connected = true;
        this.metrics.connected.set(1);
        this.log.info({ server: opts.server }, first ? 'connected to canopy' : 'reconnected to canopy');
      },
      onLost: (why, retryMs) => {
        this.state.connected = false;
        this.metrics.connected.set(0);
        this.log.warn(
          { server: opts.server, why, retryMs },
          'ADS stream lost; the datapath keeps serving the last version',
        );
      },
    });
  }

  onResponse(version: string, resources: readonly AdsResource[], again?: { retry: number }): AdsVerdict {
    const { datapath, spill, metrics, log } = this;
    const t0 = process.hrtime.bigint();
    try {
      // A resource that does not decode is rejected alone; its service (when
      // its name can be read) keeps what it had. Only new or changed bytes are decoded.
      const { trees, keep, errors, decoded, reused } = this.inbox.receive(resources);
      metrics.decodedTotal.inc(decoded);
      metrics.reusedTotal.inc(reused);
      const r = datapath.apply(trees, keep);
      try {
        spill?.sync(trees, new Set([...keep, ...r.rejected.map((x) => x.service)]));
      } catch (err) {
        // The plain pick still serves: a connect without its spill entry picks from its own node.
        log.warn({ version, detail: (err as Error).message }, 'load-aware spill entries not written');
      }
      metrics.applySeconds.observe(Number(process.hrtime.bigint() - t0) / 1e9);
      errors.push(...r.rejected.map((x) => x.detail));
      if (errors.length > 0) {
        const detail = errors.join('; ');
        const retry = r.retryAfterMs !== undefined ? { retryMs: r.retryAfterMs } : {};
        if (again) {
          // Already NACKed: the server is not told again.
          log.warn({ version, detail, retry: again.retry, ...retry }, 'tree version retried, still rejected in part');
          return { ok: false, detail, ...retry };
        }
        this.nack(version, detail);
        log.warn(
          { version, detail, changed: r.changed, removed: r.removed, ...retry },
          r.retryAfterMs !== undefined
            ? 'tree version rejected in part (NACK) for want of map room that retiring trees still hold: retried once they are freed'
            : 'tree version rejected in part (NACK); the rest is loaded, rejected services keep their last good state',
        );
        return { ok: false, detail, ...retry };
      }
      metrics.applied.inc();
      this.state.versionApplied = version;
      this.state.versionsApplied++;
      log.info(
        {
          version,
          ...(again ? { retry: again.retry } : {}),
          services: trees.length,
          decoded,
          reused,
          changed: r.changed,
          removed: r.removed,
          mapWrites: r.mapWrites,
          ms: +r.ms.toFixed(3),
        },
        'tree version applied',
      );
      this.resolveWaiters(version);
      return { ok: true };
    } catch (err) {
      const detail = (err as Error).message;
      this.nack(version, detail);
      log.warn({ version, detail }, 'tree version rejected (NACK); the maps keep the last good version');
      return { ok: false, detail };
    }
  }

  private nack(version: string, detail: string): void {
    this.metrics.nacked.inc();
    this.state.nacks++;
    this.state.lastNack = { version, detail };
  }

  private resolveWaiters(version: string): void {
    for (let i = this.waiters.length - 1; i >= 0; i--) {
      const w = this.waiters[i]!;
      if (w.version === undefined || w.version === version) {
        this.waiters.splice(i, 1);
        w.resolve(version);
      }
    }
  }
}
