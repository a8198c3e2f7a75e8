/**
 * The node agent's HTTP port: /metrics, /healthz, /debug/state, and
 * /workloads (the workload set, replaced whole while the agent runs, in the
 * syntax of --workload).
 */
import Fastify, { type FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { intToIpv4, ipv6String } from '../resources/tree-codec.js';
import type { AgentOptions } from './agent-options.js';
import { parseWorkload } from './workload-spec.js';
import type { Datapath, Workload } from './datapath.js';
import type { SpillTable } from './spill-table.js';
import type { AgentStatus } from './tree-loader.js';

export interface AgentHttpDeps {
  readonly opts: AgentOptions;
  readonly datapath: Datapath;
  readonly spill: SpillTable | undefined;
  readonly registry: Registry;
  readonly status: () => AgentStatus;
  readonly log: Logger;
}

export function agentHttp(deps: AgentHttpDeps): FastifyInstance {
  const { registry } = deps;
  const app: FastifyInstance = Fastify({ logger: false });
  app.get('/metrics', async (_req, reply) => reply.type(registry.contentType).send(await registry.metrics()));
  app.get('/healthz', async () => ({ status: 'ok' }));
  workloadRoutes(app, deps);
  app.get('/debug/state', async () => debugState(deps));
  return app;
}

function workloadRoutes(app: FastifyInstance, { opts, datapath, log }: AgentHttpDeps): void {
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
    for (const { cgroup, reason } of skipped)
      log.warn({ cgroup, reason }, 'workload skipped: its connects use the node locality');
    log.info({ workloads: next.length, skipped: skipped.length }, 'workloads replaced');
    return { workloads: workloadView(), skipped };
  });
}

function debugState({ datapath, spill, status }: AgentHttpDeps) {
  return {
    ...status(),
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
  };
}
