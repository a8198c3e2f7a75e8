/**
 * `npm start`: the bundled example mesh (server/examples/mesh.yaml) for real
 * on loopback. Canopy serves it; gRPC backends listen at its addresses;
 * proxyless gRPC clients in three localities show where their requests go,
 * before and after a zone is marked unhealthy through the admin API. Services
 * are kept in the embedded database (LevelDB), in a fresh directory per run so
 * that one run's admin changes never carry into the next.
 *
 * With `envoy`, the docker-compose.yml topology as plain processes instead
 * (demo/envoy-topology.ts): Canopy replicas on etcd, Envoy sidecars listing
 * every replica, the node agent where the kernel allows, and a replica lost.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import { formatLocality, parseLocality, type Locality } from '../domain/locality.js';
import type { ServiceSpec } from '../domain/service.js';
import { startCanopy } from '../main.js';
import { xdsBootstrap } from './bootstrap.js';
import { DEMO_VIP, envoyAfterFailover, loseReplica, startEnvoyPart, startReplicated } from './envoy-topology.js';
import { markZone, outsideZone, REQUESTS, startMesh, ZONE, type ControlPlane, type DemoMesh } from './mesh.js';
import { Teardown } from './teardown.js';
import { XdsEchoClient, type Tally } from './xds-client.js';

// Three localities; the two eu-west-1b clients reach the same tree node and share one cached CLA.
const CLIENTS = [
  'us-east/us-east-1a/rack1',
  'eu-west/eu-west-1b/rack7',
  'eu-west/eu-west-1b/rack9',
  'ap-south/ap-south-1a/rack1',
];

export interface DemoOptions {
  readonly log?: (line: string) => void;
  /**
   * When given, the demo keeps the server, backends and clients up after its
   * run until this resolves (the CLI: Ctrl-C, when stdout is a terminal), so the
   * URLs it prints can be opened.
   */
  readonly hold?: () => Promise<void>;
  /** The compose topology with real Envoy sidecars (demo/envoy-topology.ts) and requests through them. */
  readonly envoy?: boolean;
}

/** One in-process Canopy on a fresh embedded database. */
async function startEmbedded(service: ServiceSpec, teardown: Teardown): Promise<ControlPlane> {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'canopy-demo-'));
  teardown.add(() => rmSync(dataDir, { recursive: true, force: true }));
  const canopy = await startCanopy({
    config: { services: [service], server: {} },
    dataDir,
    host: '127.0.0.1',
    xdsPort: 0,
    adminPort: 0,
    logger: pino({ level: 'warn' }),
  });
  teardown.add(() => canopy.stop());
  return {
    xdsAddress: canopy.xdsAddress,
    adminAddress: canopy.adminAddress,
    storeDescription: canopy.store.description,
  };
}

function startClients(cp: ControlPlane, service: ServiceSpec, teardown: Teardown): XdsEchoClient[] {
  const clients = CLIENTS.map(
    (at) =>
      new XdsEchoClient({
        target: `xds:///${service.name}`,
        bootstrap: xdsBootstrap({ serverUri: cp.xdsAddress, nodeId: `demo-${at}`, locality: parseLocality(at) }),
      }),
  );
  teardown.add(() => clients.forEach((c) => c.close()));
  return clients;
}

function header(cp: ControlPlane, mesh: DemoMesh, log: (line: string) => void): void {
  const { service, backends, localityOf } = mesh;
  log(`Canopy demo: xDS on ${cp.xdsAddress}, admin API on http://${cp.adminAddress}, store ${cp.storeDescription}`);
  log(
    `service "${service.name}": ${backends.length} gRPC backends, mode ${service.loadBalancing.mode} over [${service.loadBalancing.routingPreference.join(', ')}]`,
  );
  for (const b of backends)
    log(`  backend ${b.address}:${b.port}  ${formatLocality(localityOf.get(b.id) ?? parseLocality(''))}`);
}

async function summary(cp: ControlPlane, log: (line: string) => void): Promise<void> {
  const metrics = await fetch(`http://${cp.adminAddress}/metrics`).then((r) => r.text());
  const read = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(metrics)?.[1] ?? NaN);
  log(
    `\nCLA cache: ${read('canopy_cla_cache_entries')} distinct cached CLAs for ${read('canopy_xds_connected_clients')} connected clients ` +
      `(${read('canopy_tree_nodes')} tree nodes; ${read('canopy_cla_cache_hits_total')} hits, ${read('canopy_cla_cache_misses_total')} misses)`,
  );
  log(`Preview any locality: curl 'http://${cp.adminAddress}/debug/cla?service=echo&region=eu-west&zone=eu-west-1a'`);
}

export async function runDemo(opts: DemoOptions = {}): Promise<void> {
  const log = opts.log ?? ((line: string) => console.log(line));
  const teardown = new Teardown();
  teardown.watchSignals();
  try {
    const mesh = await startMesh(teardown, opts.envoy ? DEMO_VIP : undefined);
    const replicated = opts.envoy ? await startReplicated(mesh.service, teardown, log) : undefined;
    let cp = replicated ?? (await startEmbedded(mesh.service, teardown));
    header(cp, mesh, log);
    const clients = startClients(cp, mesh.service, teardown);
    await Promise.all(clients.map((c) => c.waitUntil((t) => t.failures === 0 && t.byBackend.size > 0)));
    await report("Where each client's requests went", clients, log, mesh.localityOf);
    const envoy = replicated ? await startEnvoyPart(replicated, mesh, teardown, log) : undefined;

    log(`\nMarking zone ${ZONE.region}/${ZONE.zone} unhealthy through the admin API:`);
    await markZone(cp.adminAddress, mesh.service, 'unhealthy', log);
    const moved = (t: Tally) =>
      t.failures === 0 && [...t.byBackend.keys()].every((id) => outsideZone(mesh.localityOf, id));
    await clients[0]?.waitUntil(moved);
    await report('After the failover', clients, log, mesh.localityOf);
    if (envoy && replicated) {
      await envoyAfterFailover(envoy, mesh, log);
      cp = await loseReplica(replicated, mesh, envoy.envoys, log);
    }
    await summary(cp, log);
    if (opts.hold) {
      log(`\nWeb view: http://${cp.adminAddress}/ui/`);
      log('The server, backends and clients stay up until Ctrl-C.');
      teardown.unwatchSignals();
      await opts.hold();
    } else {
      log(`\nWeb view: http://${cp.adminAddress}/ui/ (run in a terminal without --exit to keep it up)`);
    }
  } finally {
    await teardown.run();
  }
}

async function report(
  title: string,
  clients: readonly XdsEchoClient[],
  log: (line: string) => void,
  localityOf: ReadonlyMap<string, Locality>,
): Promise<void> {
  log(`\n${title} (${REQUESTS} requests per client):`);
  for (const [i, c] of clients.entries()) {
    const t = await c.tally(REQUESTS);
    const at = CLIENTS[i] ?? '';
    const parts = [...t.byBackend]
      .sort((a, b) => b[1] - a[1])
      .map(([id, n]) => `${id} (${formatLocality(localityOf.get(id) ?? parseLocality(''))}) x${n}`);
    if (t.failures) parts.push(`${t.failures} failed`);
    log(`  client in ${at.padEnd(26)} -> ${parts.join(', ')}`);
  }
}
