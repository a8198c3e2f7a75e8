/**
 * `canopy demo --envoy` (`npm start -- --envoy`): docker-compose.yml's topology as plain processes on
 * loopback. Two Canopy replicas (`canopy serve`) share one etcd and one config file (one replica on its own
 * embedded database when no etcd is on PATH); two Envoy sidecars list both replicas in their bootstrap; the
 * node agent loads the locality trees into BPF maps where the kernel allows. After the locality routing and
 * the zone failover, the replica holding an Envoy's ADS stream is killed under traffic: the Envoys keep
 * routing, reconnect to the survivor, and a change made through the survivor reaches them.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { CodedError } from '../domain/errors.js';
import { parseLocality } from '../domain/locality.js';
import type { ServiceSpec } from '../domain/service.js';
import { describeTally, SIDECARS, startEnvoySidecars, type EnvoyClients } from './envoy-clients.js';
import { etcdMissing, startEtcd } from './etcd.js';
import { markZone, outsideZone, REQUESTS, ZONE, type ControlPlane, type DemoMesh } from './mesh.js';
import { agentPlace, startDemoAgent, type DemoAgent } from './node-agent.js';
import { startReplica, writeReplicaConfig, type Replica } from './replicas.js';
import type { Teardown } from './teardown.js';
import type { Tally } from './xds-client.js';

/** The echo VIP the node agent intercepts here: on loopback (compose uses 10.96.0.10), so a miss goes nowhere. */
export const DEMO_VIP = '127.0.0.10';
const AGENT_AT = 'us-east/us-east-1a/rack1';

export interface Replicated extends ControlPlane {
  readonly replicas: readonly Replica[];
}

export interface EnvoyPart {
  readonly envoys: EnvoyClients;
  readonly agent: DemoAgent | undefined;
}

type Log = (line: string) => void;

export async function startReplicated(service: ServiceSpec, teardown: Teardown, log: Log): Promise<Replicated> {
  const config = writeReplicaConfig(service, teardown);
  const missing = etcdMissing();
  let replicas: Replica[];
  let storeDescription: string;
  if (missing) {
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'canopy-demo-'));
    teardown.add(() => rmSync(dataDir, { recursive: true, force: true }));
    replicas = [await startReplica('canopy-1', config, { dataDir }, teardown)];
    storeDescription = `level:${dataDir}`;
    log(`One Canopy replica: ${missing}; replicas share their services through etcd.`);
  } else {
    const etcd = await startEtcd(teardown);
    replicas = [];
    for (const name of ['canopy-1', 'canopy-2'])
      replicas.push(await startReplica(name, config, { etcd: etcd.endpoint }, teardown));
    storeDescription = `etcd://${etcd.endpoint}/canopy-demo/ (shared by ${replicas.length} replicas)`;
  }
  for (const r of replicas)
    log(`Replica ${r.name} (pid ${r.pid}): xDS on ${r.xdsAddress}, admin API on http://${r.adminAddress}`);
  return { xdsAddress: replicas[0]!.xdsAddress, adminAddress: replicas[0]!.adminAddress, storeDescription, replicas };
}

function counts(ids: readonly string[]): string {
  const by = new Map<string, number>();
  for (const id of ids) by.set(id, (by.get(id) ?? 0) + 1);
  return [...by].map(([id, n]) => `${id} x${n}`).join(', ');
}

async function startAgentPart(cp: Replicated, mesh: DemoMesh, teardown: Teardown, log: Log) {
  const place = agentPlace();
  if ('reason' in place) {
    log(`\nNode agent: skipped (${place.reason})`);
    return undefined;
  }
  const agent = await startDemoAgent(place, cp.xdsAddress, parseLocality(AGENT_AT), teardown);
  log(`\nNode agent in ${AGENT_AT}: loaded (trees in BPF maps, attached to cgroup ${agent.cgroup})`);
  log(`  metrics and state: ${agent.metricsAddress}/debug/state`);
  await vipReport(agent, mesh.service, log);
  return agent;
}

async function vipReport(agent: DemoAgent, service: ServiceSpec, log: Log): Promise<void> {
  const ids = await agent.callVip(DEMO_VIP, service.port ?? 50051, 10);
  log(
    `  plain connect() to the VIP ${DEMO_VIP}:${service.port ?? 50051} from that cgroup (10 calls) -> ${counts(ids)}`,
  );
}

export async function startEnvoyPart(cp: Replicated, mesh: DemoMesh, teardown: Teardown, log: Log): Promise<EnvoyPart> {
  log(`\nEnvoy sidecars, each bootstrapped with every replica (${cp.replicas.map((r) => r.xdsAddress).join(', ')}):`);
  const envoys = await startEnvoySidecars(
    cp.replicas.map((r) => r.xdsAddress).join(','),
    mesh.service.port ?? 50051,
    log,
    (child) => teardown.track(child),
  );
  teardown.add(() => envoys.stop());
  await envoys.report('Through the Envoy sidecars', REQUESTS, mesh.localityOf);
  const agent = await startAgentPart(cp, mesh, teardown, log);
  return { envoys, agent };
}

export async function envoyAfterFailover(part: EnvoyPart, mesh: DemoMesh, log: Log): Promise<void> {
  const moved = (t: Tally) =>
    t.failures === 0 && [...t.byBackend.keys()].every((id) => outsideZone(mesh.localityOf, id));
  await part.envoys.waitUntil(0, moved);
  await part.envoys.report('After the failover, through the Envoy sidecars', REQUESTS, mesh.localityOf);
  const agent = part.agent;
  if (!agent) return;
  // The agent hears of the change on its own stream: wait until a VIP connect leaves the zone.
  const port = mesh.service.port ?? 50051;
  await until('the agent taking the failover', async () =>
    (await agent.callVip(DEMO_VIP, port, 1)).every((id) => outsideZone(mesh.localityOf, id)),
  );
  await vipReport(agent, mesh.service, log);
}

async function until(what: string, check: () => Promise<boolean>, ms = 20_000): Promise<number> {
  const t0 = Date.now();
  while (!(await check())) {
    if (Date.now() - t0 > ms) throw new CodedError('CANOPY_PEER_FAILED', `${what} did not happen within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return Date.now() - t0;
}

async function holds(r: Replica, nodeId: string): Promise<boolean> {
  const body = await fetch(`http://${r.adminAddress}/debug/clients`).then(
    (res) => res.json() as Promise<{ clients?: { nodeId: string }[] }>,
    () => ({ clients: [] }),
  );
  return (body.clients ?? []).some((c) => c.nodeId === nodeId);
}

/**
 * Kills the replica that holds the first Envoy's ADS stream, under traffic through both Envoys; returns the
 * control plane left (the survivor).
 */
export async function loseReplica(
  cp: Replicated,
  mesh: DemoMesh,
  envoys: EnvoyClients,
  log: Log,
): Promise<ControlPlane> {
  if (cp.replicas.length < 2) {
    log('\nReplica loss: skipped (one replica: two need etcd)');
    return cp;
  }
  const nodeId = envoys.sidecars[0]!.nodeId;
  let lost: Replica | undefined;
  await until(`${nodeId} on a replica`, async () => {
    for (const r of cp.replicas) if (await holds(r, nodeId)) lost = r;
    return lost !== undefined;
  });
  const survivor = cp.replicas.find((r) => r !== lost)!;
  log(
    `\nKilling replica ${lost!.name} (kill -9, pid ${lost!.pid}), which holds the ADS stream of the Envoy in ${SIDECARS[0]!.at}, under traffic:`,
  );
  const traffic = envoys.steady();
  await lost!.kill();
  const ms = await until('the reconnect', async () => (await holds(survivor, nodeId)) && (await envoys.connected(0)));
  log(`  the Envoy in ${SIDECARS[0]!.at} reconnected to ${survivor.name} ${ms} ms after the kill`);
  log(`Marking zone ${ZONE.region}/${ZONE.zone} healthy again through ${survivor.name}'s admin API:`);
  await markZone(survivor.adminAddress, mesh.service, 'healthy', log);
  await envoys.waitUntil(
    0,
    (t) => t.failures === 0 && [...t.byBackend.keys()].every((id) => !outsideZone(mesh.localityOf, id)),
  );
  const tallies = await traffic.stop();
  const sent = tallies.reduce((n, t) => n + t.failures + [...t.byBackend.values()].reduce((a, b) => a + b, 0), 0);
  const failed = tallies.reduce((n, t) => n + t.failures, 0);
  for (const [i, t] of tallies.entries())
    log(`  during the loss, Envoy in ${(SIDECARS[i]?.at ?? '').padEnd(26)} -> ${describeTally(t, mesh.localityOf)}`);
  log(`Replica loss: ${sent} requests through the Envoy sidecars while ${lost!.name} was lost, ${failed} failed`);
  await envoys.report(`After losing ${lost!.name}, through the Envoy sidecars`, REQUESTS, mesh.localityOf);
  return {
    xdsAddress: survivor.xdsAddress,
    adminAddress: survivor.adminAddress,
    storeDescription: cp.storeDescription,
  };
}
