/**
 * The node agent: subscribes to canopy.v1.LocalityTree over ADS, loads each
 * version into the BPF maps through the Datapath, and ACKs a version only
 * once it is in the maps (NACKs, with the reason, one it cannot load).
 * Serves /metrics, /healthz and /debug/state on an HTTP port.
 */
import * as grpc from '@grpc/grpc-js';
import Fastify, { type FastifyInstance } from 'fastify';
import pino, { type Logger } from 'pino';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { Placement } from '../domain/locality.js';
import { messageType } from '../wire/protos.js';
import { contentHash } from '../resources/resource.js';
import { decodeLocalityTree, intToIpv4, type TreeMessage } from '../resources/tree-codec.js';
import { TREE_TYPE } from '../resources/type-urls.js';
import { Datapath, type Workload } from './datapath.js';
import type { IncomingTree } from './planner.js';

const ADS_METHOD = '/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources';

export interface AgentOptions {
  /** host:port of Canopy's ADS server */
  readonly server: string;
  readonly nodeId: string;
  readonly placement: Placement;
  readonly cgroup: string;
  readonly workloads?: readonly Workload[];
  readonly pinDir?: string;
  readonly graceMs?: number;
  /** HTTP port for /metrics (0: any free port; default 19100) */
  readonly metricsPort?: number;
  readonly metricsHost?: string;
  readonly logLevel?: string;
  readonly maxEndpoints?: number;
}

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

interface RawResponse {
  version_info?: string;
  resources?: { type_url?: string; value?: Uint8Array }[];
  type_url?: string;
  nonce?: string;
}

export async function startAgent(opts: AgentOptions): Promise<RunningAgent> {
  const log: Logger = pino({ name: 'canopy-agent', level: opts.logLevel ?? 'info' });
  const pinDir = opts.pinDir ?? '/sys/fs/bpf/canopy';
  const datapath = Datapath.open({
    pinDir,
    cgroup: opts.cgroup,
    ...(opts.graceMs !== undefined ? { graceMs: opts.graceMs } : {}),
    ...(opts.maxEndpoints !== undefined ? { maxEndpoints: opts.maxEndpoints } : {}),
  });
  datapath.setWorkloads(opts.placement, opts.workloads ?? []);
  log.info(
    { pinDir, cgroup: opts.cgroup, resumed: datapath.resumed, services: datapath.services().length, workloads: (opts.workloads ?? []).length },
    datapath.resumed ? 'datapath resumed from pinned maps' : 'datapath loaded and attached',
  );

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
  new Gauge({
    name: 'canopy_agent_kernel_connects',
    help: 'connect() calls to a service VIP seen by the kernel program, by outcome (since the maps were created)',
    labelNames: ['outcome'],
    registers,
    collect() {
      const s = datapath.stats();
      this.set({ outcome: 'rewritten' }, Number(s.rewritten));
      this.set({ outcome: 'refused' }, Number(s.refused));
    },
  });
  new Gauge({
    name: 'canopy_agent_kernel_map_lookups',
    help: 'BPF map lookups made by the kernel program for VIP connects (since the maps were created)',
    registers,
    collect() {
      this.set(Number(datapath.stats().lookups));
    },
  });
  const connectedGauge = new Gauge({ name: 'canopy_agent_connected', help: '1 while the ADS stream is up', registers });

  // ------------------------------------------------------------- ADS
  const status: { connected: boolean; versionApplied: string; versionsApplied: number; nacks: number; lastNack?: { version: string; detail: string } } = {
    connected: false,
    versionApplied: '',
    versionsApplied: 0,
    nacks: 0,
  };
  const waiters: { version: string | undefined; resolve: (v: string) => void }[] = [];
  const Request = messageType('envoy.service.discovery.v3.DiscoveryRequest');
  const Response = messageType('envoy.service.discovery.v3.DiscoveryResponse');
  const node = {
    id: opts.nodeId,
    cluster: 'canopy-agent',
    locality: { region: opts.placement.locality.region, zone: opts.placement.locality.zone, sub_zone: opts.placement.locality.subzone },
    user_agent_name: 'canopy-agent',
  };
  const client = new grpc.Client(opts.server, grpc.credentials.createInsecure());
  let call: grpc.ClientDuplexStream<Buffer, Buffer> | undefined;
  let stopping = false;
  let backoff = 250;
  let retry: NodeJS.Timeout | undefined;
  let first = true;

  const send = (req: object): void => {
    call?.write(Buffer.from(Request.encode(Request.fromObject(req)).finish()));
  };

  const onResponse = (bytes: Buffer): void => {
    const res = Response.toObject(Response.decode(bytes), { defaults: true }) as RawResponse;
    if (res.type_url !== TREE_TYPE) return;
    const version = res.version_info ?? '';
    const nonce = res.nonce ?? '';
    const t0 = process.hrtime.bigint();
    try {
      const trees: IncomingTree[] = (res.resources ?? []).map((any, i) => {
        if (any.type_url !== TREE_TYPE) throw new Error(`resources[${i}]: type_url ${any.type_url} is not ${TREE_TYPE}`);
        const value = any.value ?? new Uint8Array();
        return { tree: decodeLocalityTree(value), hash: contentHash(value) };
      });
      const r = datapath.apply(trees);
      applySeconds.observe(Number(process.hrtime.bigint() - t0) / 1e9);
      applied.inc();
      status.versionApplied = version;
      status.versionsApplied++;
      log.info({ version, services: trees.length, changed: r.changed, removed: r.removed, mapWrites: r.mapWrites, ms: +r.ms.toFixed(3) }, 'tree version applied');
      send({ node, type_url: TREE_TYPE, version_info: version, response_nonce: nonce, resource_names: [] });
      for (let i = waiters.length - 1; i >= 0; i--) {
        const w = waiters[i]!;
        if (w.version === undefined || w.version === version) {
          waiters.splice(i, 1);
          w.resolve(version);
        }
      }
    } catch (err) {
      const detail = (err as Error).message;
      nacked.inc();
      status.nacks++;
      status.lastNack = { version, detail };
      log.warn({ version, detail }, 'tree version rejected (NACK); the maps keep the last good version');
      send({
        node,
        type_url: TREE_TYPE,
        version_info: status.versionApplied,
        response_nonce: nonce,
        resource_names: [],
        error_detail: { code: grpc.status.INVALID_ARGUMENT, message: detail },
      });
    }
  };

  const connect = (): void => {
    if (stopping) return;
    const c = client.makeBidiStreamRequest<Buffer, Buffer>(ADS_METHOD, (b) => b, (b) => b);
    call = c;
    let got = false;
    c.on('data', (b: Buffer) => {
      if (!got) {
        got = true;
        backoff = 250;
        status.connected = true;
        connectedGauge.set(1);
        log.info({ server: opts.server }, first ? 'connected to canopy' : 'reconnected to canopy');
        first = false;
      }
      onResponse(b);
    });
    const lost = (why: string): void => {
      if (call !== c) return;
      call = undefined;
      status.connected = false;
      connectedGauge.set(0);
      if (stopping) return;
      log.warn({ server: opts.server, why, retryMs: backoff }, 'ADS stream lost; the datapath keeps serving the last version');
      retry = setTimeout(connect, backoff);
      backoff = Math.min(backoff * 2, 5000);
    };
    c.on('error', (err: Error) => lost(err.message));
    c.on('end', () => lost('stream ended'));
    send({ node, type_url: TREE_TYPE, version_info: status.versionApplied, resource_names: [] });
  };
  connect();

  // ------------------------------------------------------------- HTTP
  const app: FastifyInstance = Fastify({ logger: false });
  app.get('/metrics', async (_req, reply) => reply.type(registry.contentType).send(await registry.metrics()));
  app.get('/healthz', async () => ({ status: 'ok' }));
  app.get('/debug/state', async () => ({
    ...status,
    entries: datapath.entries(),
    kernel: Object.fromEntries(Object.entries(datapath.stats()).map(([k, v]) => [k, Number(v)])),
    services: datapath.services().map((s) => ({
      service: s.name,
      vip: `${intToIpv4(s.key.vip)}:${s.key.port}`,
      tree: s.tree,
      endpoints: s.range.length,
      nodes: s.nodeCount,
    })),
  }));
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
    async stop(stopOpts = {}) {
      stopping = true;
      if (retry) clearTimeout(retry);
      call?.cancel();
      client.close();
      await app.close();
      datapath.close({ ...(stopOpts.detach ? { detach: true } : {}), cgroup: opts.cgroup });
    },
  };
}

export type { TreeMessage };
