/**
 * `npm start`: the bundled example mesh (server/examples/mesh.yaml) for real
 * on loopback. Canopy serves it; gRPC backends listen at its addresses;
 * proxyless gRPC clients in three localities show where their requests go,
 * before and after a zone is marked unhealthy through the admin API. Services
 * are kept in the embedded database (LevelDB), in a fresh directory per run so
 * that one run's admin changes never carry into the next.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { pino } from 'pino';
import { formatLocality, parseLocality, type Locality } from '../domain/locality.js';
import type { ServiceSpec } from '../domain/service.js';
import { startCanopy } from '../main.js';
import { loadConfigFile } from '../config/config-file.js';
import { startBackend, type Backend } from './backend.js';
import { xdsBootstrap } from './bootstrap.js';
import { XdsEchoClient, type Tally } from './xds-client.js';
import { startEnvoySidecars, type EnvoyClients } from './envoy-clients.js';

// Three localities; the two eu-west-1b clients reach the same tree node and share one cached CLA.
const CLIENTS = [
  'us-east/us-east-1a/rack1',
  'eu-west/eu-west-1b/rack7',
  'eu-west/eu-west-1b/rack9',
  'ap-south/ap-south-1a/rack1',
];
const REQUESTS = 60;

export interface DemoOptions {
  readonly log?: (line: string) => void;
  /**
   * When given, the demo keeps the server, backends and clients up after its
   * run until this resolves (the CLI: Ctrl-C, when stdout is a terminal), so the
   * URLs it prints can be opened.
   */
  readonly hold?: () => Promise<void>;
  /** Also run real Envoy sidecars (demo/envoy-sidecars.ts) and send requests through them. */
  readonly envoy?: boolean;
}

export async function runDemo(opts: DemoOptions = {}): Promise<void> {
  const log = opts.log ?? ((line: string) => console.log(line));
  const configFile = fileURLToPath(new URL('../../../../server/examples/mesh.yaml', import.meta.url));
  const loaded = await loadConfigFile(configFile);
  if (!loaded.ok) throw new Error(`bundled config is invalid: ${JSON.stringify(loaded.errors)}`);
  const example = loaded.value.services[0];
  if (!example) throw new Error('bundled config has no service');

  // Backends at the example's addresses, on free ports so the demo never collides.
  const backends: Backend[] = [];
  const localityOf = new Map<string, Locality>();
  for (const ep of example.endpoints) {
    const b = await startBackend({ id: `${ep.address}`, host: ep.address, locality: ep.locality });
    backends.push(b);
    localityOf.set(b.id, ep.locality);
  }
  const service: ServiceSpec = {
    ...example,
    endpoints: example.endpoints.map((ep, i) => ({ ...ep, port: backends[i]?.port ?? ep.port })),
  };
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'canopy-demo-'));
  const canopy = await startCanopy({
    config: { services: [service], server: {} },
    dataDir,
    host: '127.0.0.1',
    xdsPort: 0,
    adminPort: 0,
    logger: pino({ level: 'warn' }),
  });
  let envoys: EnvoyClients | undefined;
  const clients = CLIENTS.map(
    (at) =>
      new XdsEchoClient({
        target: `xds:///${service.name}`,
        bootstrap: xdsBootstrap({ serverUri: canopy.xdsAddress, nodeId: `demo-${at}`, locality: parseLocality(at) }),
      }),
  );

  try {
    log(
      `Canopy demo: xDS on ${canopy.xdsAddress}, admin API on http://${canopy.adminAddress}, store ${canopy.store.description}`,
    );
    log(
      `service "${service.name}": ${backends.length} gRPC backends, mode ${service.loadBalancing.mode} over [${service.loadBalancing.routingPreference.join(', ')}]`,
    );
    for (const b of backends)
      log(`  backend ${b.address}:${b.port}  ${formatLocality(localityOf.get(b.id) ?? parseLocality(''))}`);

    await Promise.all(clients.map((c) => c.waitUntil((t) => t.failures === 0 && t.byBackend.size > 0)));
    await report("Where each client's requests went", clients, log, localityOf);
    if (opts.envoy) {
      envoys = await startEnvoySidecars(canopy.xdsAddress, service.port ?? 50051, log);
      await envoys.report('Through the Envoy sidecars', REQUESTS, localityOf);
    }

    const zone = { region: 'us-east', zone: 'us-east-1a' };
    log(`\nMarking zone ${zone.region}/${zone.zone} unhealthy through the admin API:`);
    for (const ep of service.endpoints) {
      if (ep.locality.region !== zone.region || ep.locality.zone !== zone.zone) continue;
      const path = `/api/v1/services/${service.name}/endpoints/${encodeURIComponent(`${ep.address}:${ep.port}`)}`;
      const res = await fetch(`http://${canopy.adminAddress}${path}`, {
        method: 'PATCH',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ health: 'unhealthy' }),
      });
      log(`  PATCH ${path} {"health":"unhealthy"} -> ${res.status}`);
    }
    const moved = (t: Tally) =>
      t.failures === 0 && [...t.byBackend.keys()].every((id) => localityOf.get(id)?.zone !== zone.zone);
    await clients[0]?.waitUntil(moved);
    await report('After the failover', clients, log, localityOf);
    if (envoys) {
      await envoys.waitUntil(0, moved);
      await envoys.report('After the failover, through the Envoy sidecars', REQUESTS, localityOf);
    }

    const metrics = await fetch(`http://${canopy.adminAddress}/metrics`).then((r) => r.text());
    const read = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(metrics)?.[1] ?? NaN);
    log(
      `\nCLA cache: ${read('canopy_cla_cache_entries')} distinct cached CLAs for ${read('canopy_xds_connected_clients')} connected clients ` +
        `(${read('canopy_tree_nodes')} tree nodes; ${read('canopy_cla_cache_hits_total')} hits, ${read('canopy_cla_cache_misses_total')} misses)`,
    );
    log(
      `Preview any locality: curl 'http://${canopy.adminAddress}/debug/cla?service=echo&region=eu-west&zone=eu-west-1a'`,
    );
    if (opts.hold) {
      log(`\nWeb view: http://${canopy.adminAddress}/ui/`);
      log('The server, backends and clients stay up until Ctrl-C.');
      await opts.hold();
    } else {
      log(`\nWeb view: http://${canopy.adminAddress}/ui/ (run in a terminal without --exit to keep it up)`);
    }
  } finally {
    await envoys?.stop();
    for (const c of clients) c.close();
    await canopy.stop();
    await Promise.all(backends.map((b) => b.stop()));
    rmSync(dataDir, { recursive: true, force: true });
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
