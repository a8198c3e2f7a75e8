/**
 * The node agent: subscribes to canopy.v1.LocalityTree over ADS, loads each
 * version into the BPF maps through the Datapath, and ACKs a version only
 * once it is in the maps (NACKs, with the reason, one it cannot load).
 * Serves /metrics, /healthz and /debug/state on an HTTP port.
 */
import Fastify, { type FastifyInstance } from 'fastify';
import pino, { type Logger } from 'pino';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { AgentAdsClient, type AdsResource, type AdsVerdict } from '../transport/agent-ads-client.js';
import { intToIpv4, ipv6String, type TreeMessage } from '../resources/tree-codec.js';
import { TREE_TYPE } from '../resources/type-urls.js';
import { DEFAULT_PIN_DIR, type AgentOptions } from './agent-options.js';
import { parseWorkload } from './cli-agent.js';
import { loadAddon } from './bpf.js';
import { Datapath, type Workload } from './datapath.js';
import { LoadReporter } from './load-reporter.js';
import { SpillTable } from './spill-table.js';
import { TreeInbox } from './tree-inbox.js';

export type { AgentOptions } from './agent-options.js';

export interface AgentStatus {
  readonly connected: boolean;
  readonly versionApplied: string;
  readonly versionsApplied: number;
  readonly nacks: number;
  readonly lastNack?: { version: string; detail: string };
}

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
    { pinDir, cgroup: opts.cgroup, resumed: datapath.resumed, services: datapath.services().length, workloads: (opts.workloads ?? []).length },
    datapath.resumed ? 'datapath resumed from pinned maps' : 'datapath loaded and attached',
  );

  // Load-aware services: spill entries from the trees, connect counts reported over LRS.
  const spill = SpillTable.open(loadAddon(), pinDir);
  if (!spill) log.warn({ pinDir }, 'the BPF object has no load-aware maps: kernel clients get health-only balancing');

  // ------------------------------------------------------------- metrics
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const registers = [registry];
  const applied = new Counter({ name: 'canopy_agent_tree_versions_applied_total', help: 'Tree versions loaded into the maps and ACKed', registers });
  const nacked = new Counter({ name: 'canopy_agent_tree_nacks_total', help: 'Tree versions that could not be loaded (NACKed)', registers });
  const applySeconds = new Histogram({
    name: 'canopy_agent_apply_seconds',
    help: 'Time to load one tree version into the maps',
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers,
  });
  new Gauge({
    name: 'canopy_agent_map_entries',
    help: 'Entries the agent holds in each BPF map',
    labelNames: ['map'],
    registers,
    collect() {
      const e = datapath.entries();
      for (const [map, n] of Object.entries(e)) this.set({ map }, n);
    },
  });
  // Monotonic counts kept by the kernel program: counters (rate()/increase() work), mirrored at scrape time.
  new Counter({
    name: 'canopy_agent_kernel_connects_total',
    help: 'connect() calls to a service VIP seen by the kernel program, by outcome (since the maps were created)',
    labelNames: ['outcome'],
    registers,
    collect() {
      const s = datapath.stats();
      this.reset();
      this.inc({ outcome: 'rewritten' }, Number(s.rewritten));
      this.inc({ outcome: 'refused' }, Number(s.refused));
    },
  });
  new Counter({
    name: 'canopy_agent_kernel_map_lookups_total',
    help: 'BPF map lookups made by the kernel program for VIP connects (since the maps were created)',
    registers,
    collect() {
      this.reset();
      this.inc(Number(datapath.stats().lookups));
    },
  });
  const decodedTotal = new Counter({
    name: 'canopy_agent_tree_resources_decoded_total',
    help: 'Tree resources decoded (new or changed bytes)',
    registers,
  });
  const reusedTotal = new Counter({
    name: 'canopy_agent_tree_resources_reused_total',
    help: 'Tree resources whose bytes equal the last version\'s: not decoded again',
    registers,
  });
  // Load-aware services: connects counted by the kernel per target locality (what the LRS reports carry).
  new Counter({
    name: 'canopy_agent_load_connects_total',
    help: 'connect() calls to load-aware services counted by the kernel, by service and the locality picked (since each counter was created)',
    labelNames: ['service', 'locality'],
    registers,
    collect() {
      this.reset();
      for (const c of spill?.counts() ?? []) {
        if (!c.service || !c.locality) continue;
        const l = c.locality;
        this.inc({ service: c.service, locality: [l.region, l.zone, l.subzone].join('/') }, Number(c.connects));
      }
    },
  });
  const inbox = new TreeInbox();
  const connectedGauge = new Gauge({ name: 'canopy_agent_connected', help: '1 while the ADS stream is up', registers });

  // ------------------------------------------------------------- ADS
  const status: { connected: boolean; versionApplied: string; versionsApplied: number; nacks: number; lastNack?: { version: string; detail: string } } = {
    connected: false,
    versionApplied: '',
    versionsApplied: 0,
    nacks: 0,
  };
  const waiters: { version: string | undefined; resolve: (v: string) => void }[] = [];

  const onResponse = (version: string, resources: readonly AdsResource[], again?: { retry: number }): AdsVerdict => {
    const t0 = process.hrtime.bigint();
    try {
      // A resource that does not decode is rejected alone; its service (when
      // its name can be read) keeps what it had. Only new or changed bytes are decoded.
      const { trees, keep, errors, decoded, reused } = inbox.receive(resources);
      decodedTotal.inc(decoded);
      reusedTotal.inc(reused);
      const r = datapath.apply(trees, keep);
      try {
        spill?.sync(trees, new Set([...keep, ...r.rejected.map((x) => x.service)]));
      } catch (err) {
        // The plain pick still serves: a connect without its spill entry picks from its own node.
        log.warn({ version, detail: (err as Error).message }, 'load-aware spill entries not written');
      }
      applySeconds.observe(Number(process.hrtime.bigint() - t0) / 1e9);
      errors.push(...r.rejected.map((x) => x.detail));
      if (errors.length > 0) {
        const detail = errors.join('; ');
        const retry = r.retryAfterMs !== undefined ? { retryMs: r.retryAfterMs } : {};
        if (again) {
          // Already NACKed: the server is not told again.
          log.warn({ version, detail, retry: again.retry, ...retry }, 'tree version retried, still rejected in part');
          return { ok: false, detail, ...retry };
        }
        nacked.inc();
        status.nacks++;
        status.lastNack = { version, detail };
        log.warn(
          { version, detail, changed: r.changed, removed: r.removed, ...retry },
          r.retryAfterMs !== undefined
            ? 'tree version rejected in part (NACK) for want of map room that retiring trees still hold: retried once they are freed'
            : 'tree version rejected in part (NACK); the rest is loaded, rejected services keep their last good state',
        );
        return { ok: false, detail, ...retry };
      }
      applied.inc();
      status.versionApplied = version;
      status.versionsApplied++;
      log.info({ version, ...(again ? { retry: again.retry } : {}), services: trees.length, decoded, reused, changed: r.changed, removed: r.removed, mapWrites: r.mapWrites, ms: +r.ms.toFixed(3) }, 'tree version applied');
      for (let i = waiters.length - 1; i >= 0; i--) {
        const w = waiters[i]!;
        if (w.version === undefined || w.version === version) {
          waiters.splice(i, 1);
          w.resolve(version);
        }
      }
      return { ok: true };
    } catch (err) {
      const detail = (err as Error).message;
      nacked.inc();
      status.nacks++;
      status.lastNack = { version, detail };
      log.warn({ version, detail }, 'tree version rejected (NACK); the maps keep the last good version');
      return { ok: false, detail };
    }
  };

  const ads = new AgentAdsClient({
    server: opts.server,
    node: { id: opts.nodeId, cluster: 'canopy-agent', locality: opts.placement.locality, userAgent: 'canopy-agent' },
    typeUrl: TREE_TYPE,
    onResponse,
    onConnected(first) {
      status.connected = true;
      connectedGauge.set(1);
      log.info({ server: opts.server }, first ? 'connected to canopy' : 'reconnected to canopy');
    },
    onLost(why, retryMs) {
      status.connected = false;
      connectedGauge.set(0);
      log.warn({ server: opts.server, why, retryMs }, 'ADS stream lost; the datapath keeps serving the last version');
    },
  });
  ads.start();

  // Kernel connects as load (LRS), from the caller's node: the server counts them as offered load.
  const lrs = spill
    ? new LoadReporter({ server: opts.server, nodeId: opts.nodeId, placement: opts.placement, spill, log })
    : undefined;
  lrs?.start();

  // ------------------------------------------------------------- HTTP
  const app: FastifyInstance = Fastify({ logger: false });
  app.get('/metrics', async (_req, reply) => reply.type(registry.contentType).send(await registry.metrics()));
  app.get('/healthz', async () => ({ status: 'ok' }));
  // The workload set, replaced whole while the agent runs (same syntax as --workload).
  let workloads: readonly Workload[] = opts.workloads ?? [];
  const workloadView = () => workloads.map((w) => ({ cgroup: w.cgroup, placement: w.placement }));
  app.get('/workloads', async () => ({ workloads: workloadView() }));
  app.put('/workloads', async (req, reply) => {
    const body = req.body as { workloads?: unknown } | undefined;
    const list = body?.workloads;
    if (!Array.isArray(list) || !list.every((w) => typeof w === 'string')) {
      return reply.code(400).send({ error: 'body must be {"workloads": ["CGROUP=k=v,...", ...]}' });
    }
    let next: Workload[];
    try {
      next = list.map((w: string) => parseWorkload(w, opts.placement, opts.cgroup));
    } catch (err) {
      return reply.code(400).send({ error: (err as Error).message });
    }
    const skipped = datapath.setWorkloads(opts.placement, next);
    workloads = next;
    for (const { cgroup, reason } of skipped) log.warn({ cgroup, reason }, 'workload skipped: its connects use the node locality');
    log.info({ workloads: next.length, skipped: skipped.length }, 'workloads replaced');
    return { workloads: workloadView(), skipped };
  });
  app.get('/debug/state', async () => ({
    ...status,
    entries: datapath.entries(),
    kernel: Object.fromEntries(Object.entries(datapath.stats()).map(([k, v]) => [k, Number(v)])),
    // Load-aware services: connects per locality picked (reported over LRS as load from this node).
    loadConnects: (spill?.counts() ?? []).flatMap((c) =>
      c.service && c.locality ? [{ service: c.service, locality: c.locality, connects: Number(c.connects) }] : [],
    ),
    services: datapath.services().map((s) => ({
      service: s.name,
      vip: s.key.vip6 ? `[${ipv6String(s.key.vip6)}]:${s.key.port}` : `${intToIpv4(s.key.vip)}:${s.key.port}`,
      tree: s.tree,
      // Live endpoints; slots: the endpoint-map entries the service holds (every node's bucket, spare room of grown buckets and a network-first service's merged tree included).
      endpoints: s.endpoints,
      slots: s.ranges.reduce((n, r) => n + r.length, 0),
      nodes: s.nodeCount,
    })),
  }));
  // `canopy agent uninstall` under a running agent: ACKing versions into maps nothing reads
  // would report a healthy node that steers nothing. The agent stops and says so; it does not
  // re-attach (that would undo what the operator asked for).
  let stopped = false;
  const watch = setInterval(() => {
    const reason = datapath.uninstalledBecause();
    if (reason === undefined || stopped) return;
    clearInterval(watch);
    log.error({ reason, pinDir, cgroup: opts.cgroup }, 'the datapath was uninstalled under this agent (canopy agent uninstall?): the agent exits; start it again to reinstall');
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
    status: () => ({ ...status }),
    applied: (version) =>
      version !== undefined && status.versionApplied === version
        ? Promise.resolve(version)
        : new Promise((resolve) => waiters.push({ version, resolve })),
    stop,
  };
}

export type { TreeMessage };
