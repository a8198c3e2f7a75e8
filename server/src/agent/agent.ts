/**
 * The node agent: subscribes to canopy.v1.LocalityTree over ADS, loads each
 * version into the BPF maps through the Datapath, and ACKs a version only
 * once it is in the maps (NACKs, with the reason, one it cannot load).
 * Serves /metrics, /healthz and /debug/state on an HTTP port.
 */
import pino, { type Logger } from 'pino';
import type { TreeMessage } from '../resources/tree-codec.js';
import { DEFAULT_PIN_DIR, type AgentOptions } from './agent-options.js';
import { agentHttp } from './agent-http.js';
import { agentMetrics } from './agent-metrics.js';
import { loadAddon } from './bpf.js';
import { Datapath } from './datapath.js';
import { LoadReporter } from './load-reporter.js';
import { SpillTable } from './spill-table.js';
import { TreeLoader, type AgentStatus } from './tree-loader.js';

export type { AgentOptions } from './agent-options.js';

export type { AgentStatus } from './tree-loader.js';

export interface RunningAgent {
  readonly datapath: Datapath;
  readonly metricsAddress: string;
  status(): AgentStatus;
  /** Resolves once `version` (or, with no argument, any version) has been applied. */
  applied(version?: string): Promise<string>;
  /** Stops the agent; the datapath keeps serving from the pinned maps unless `detach`. */
  stop(opts?: { detach?: boolean }): Promise<void>;
}

export async function startAgent(opts: AgentOptions): Promise<RunningAgent> {
  const log: Logger = pino({ name: 'canopy-agent', level: opts.logLevel ?? 'info' });
  const pinDir = opts.pinDir ?? DEFAULT_PIN_DIR;
  const datapath = openDatapath(opts, pinDir, log);

  // Load-aware services: spill entries from the trees, connect counts reported over LRS.
  const spill = SpillTable.open(loadAddon(), pinDir);
  if (!spill) log.warn({ pinDir }, 'the BPF object has no load-aware maps: kernel clients get health-only balancing');

  const metrics = agentMetrics(datapath, spill);
  const loader = new TreeLoader(datapath, spill, metrics, log);
  const ads = loader.client(opts);
  ads.start();

  // Kernel connects as load (LRS), from the caller's node: the server counts them as offered load.
  const lrs = spill
    ? new LoadReporter({
        server: opts.server,
        ...(opts.tls ? { tls: opts.tls } : {}),
        nodeId: opts.nodeId,
        placement: opts.placement,
        spill,
        log,
      })
    : undefined;
  lrs?.start();

  const app = agentHttp({ opts, datapath, spill, registry: metrics.registry, status: () => loader.status(), log });
  // `canopy agent uninstall` under a running agent: ACKing versions into maps nothing reads
  // would report a healthy node that steers nothing. The agent stops and says so; it does not
  // re-attach (that would undo what the operator asked for).
  let stopped = false;
  const watch = setInterval(() => {
    const reason = datapath.uninstalledBecause();
    if (reason === undefined || stopped) return;
    clearInterval(watch);
    log.error(
      { reason, pinDir, cgroup: opts.cgroup },
      'the datapath was uninstalled under this agent (canopy agent uninstall?): the agent exits; start it again to reinstall',
    );
    void stop().then(() => (opts.onUninstalled ?? (() => process.exit(1)))(reason));
  }, opts.watchMs ?? 1000);
  watch.unref();
  const stop = async (stopOpts: { detach?: boolean } = {}) => {
    if (stopped) return;
    stopped = true;
    clearInterval(watch);
    ads.stop();
    lrs?.stop();
    spill?.close();
    await app.close();
    datapath.close({ ...(stopOpts.detach ? { detach: true } : {}), cgroup: opts.cgroup });
  };

  const metricsAddress = await app.listen({ host: opts.metricsHost ?? '127.0.0.1', port: opts.metricsPort ?? 19100 });
  log.info({ metrics: metricsAddress }, 'canopy agent ready');

  return {
    datapath,
    metricsAddress,
    status: () => loader.status(),
    applied: (version) => loader.applied(version),
    stop,
  };
}

/** Opens (or resumes from the pinned maps) the kernel datapath and places the workloads. */
function openDatapath(opts: AgentOptions, pinDir: string, log: Logger): Datapath {
  const datapath = Datapath.open({
    pinDir,
    cgroup: opts.cgroup,
    ...(opts.graceMs !== undefined ? { graceMs: opts.graceMs } : {}),
    ...(opts.maxEndpoints !== undefined ? { maxEndpoints: opts.maxEndpoints } : {}),
    ...(opts.maxNodes !== undefined ? { maxNodes: opts.maxNodes } : {}),
    ...(opts.maxServices !== undefined ? { maxServices: opts.maxServices } : {}),
  });
  if (datapath.replaced) log.info({ pinDir }, 'the pinned program was from another build: replaced in place');
  for (const { cgroup, reason } of datapath.setWorkloads(opts.placement, opts.workloads ?? [])) {
    log.warn({ cgroup, reason }, 'workload skipped: its connects use the node locality');
  }
  log.info(
    {
      pinDir,
      cgroup: opts.cgroup,
      resumed: datapath.resumed,
      services: datapath.services().length,
      workloads: (opts.workloads ?? []).length,
    },
    datapath.resumed ? 'datapath resumed from pinned maps' : 'datapath loaded and attached',
  );
  return datapath;
}

export type { TreeMessage };
