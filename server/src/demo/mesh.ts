/**
 * What every demo run has: the bundled example service (server/examples/mesh.yaml) with a gRPC backend at
 * each of its endpoint addresses on a free port, the control plane the clients talk to, and the admin API
 * calls the demo makes (a zone marked unhealthy, then healthy again).
 */
import { fileURLToPath } from 'node:url';
import { loadConfigFile } from '../config/config-file.js';
import { CodedError } from '../domain/errors.js';
import type { Locality } from '../domain/locality.js';
import type { ServiceSpec } from '../domain/service.js';
import { startBackend, type Backend } from './backend.js';
import type { Teardown } from './teardown.js';

/** Requests per client in each report. */
export const REQUESTS = 60;
/** The zone the demo fails over from. */
export const ZONE = { region: 'us-east', zone: 'us-east-1a' } as const;

export interface DemoMesh {
  readonly service: ServiceSpec;
  readonly backends: readonly Backend[];
  /** Backend id → its locality. */
  readonly localityOf: ReadonlyMap<string, Locality>;
}

export interface ControlPlane {
  /** HOST:PORT of the ADS server the proxyless clients and the node agent use. */
  readonly xdsAddress: string;
  /** HOST:PORT of its admin API. */
  readonly adminAddress: string;
  readonly storeDescription: string;
}

async function exampleService(): Promise<ServiceSpec> {
  const file = fileURLToPath(new URL('../../../../server/examples/mesh.yaml', import.meta.url));
  const loaded = await loadConfigFile(file);
  if (!loaded.ok) throw new CodedError('CANOPY_INVALID_CONFIG', 'the bundled config is invalid', loaded.errors);
  const example = loaded.value.services[0];
  if (!example) throw new CodedError('CANOPY_INVALID_CONFIG', 'the bundled config has no service');
  return example;
}

/** The example's backends, on free ports so that the demo never collides; `vip` replaces the example's. */
export async function startMesh(teardown: Teardown, vip?: string): Promise<DemoMesh> {
  const example = await exampleService();
  const backends: Backend[] = [];
  const localityOf = new Map<string, Locality>();
  for (const ep of example.endpoints) {
    const b = await startBackend({ id: `${ep.address}`, host: ep.address, locality: ep.locality });
    teardown.add(() => b.stop());
    backends.push(b);
    localityOf.set(b.id, ep.locality);
  }
  const service: ServiceSpec = {
    ...example,
    ...(vip !== undefined ? { vip } : {}),
    endpoints: example.endpoints.map((ep, i) => ({ ...ep, port: backends[i]?.port ?? ep.port })),
  };
  return { service, backends, localityOf };
}

/** PATCHes the health of every endpoint of `service` in ZONE through the admin API at `admin`. */
export async function markZone(
  admin: string,
  service: ServiceSpec,
  health: 'healthy' | 'unhealthy',
  log: (line: string) => void,
): Promise<void> {
  for (const ep of service.endpoints) {
    if (ep.locality.region !== ZONE.region || ep.locality.zone !== ZONE.zone) continue;
    const path = `/api/v1/services/${service.name}/endpoints/${encodeURIComponent(`${ep.address}:${ep.port}`)}`;
    const res = await fetch(`http://${admin}${path}`, {
      method: 'PATCH',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ health }),
    });
    log(`  PATCH ${path} {"health":"${health}"} -> ${res.status}`);
  }
}

/** Whether `id`'s backend is outside ZONE. */
export function outsideZone(localityOf: ReadonlyMap<string, Locality>, id: string): boolean {
  const l = localityOf.get(id);
  return l?.region !== ZONE.region || l.zone !== ZONE.zone;
}
