/**
 * What the store keeps over the config file by the ownership rule
 * (file-source.ts): endpoints of file-owned services an API write changed
 * since the file was applied. Health or weight set through the API survives
 * a restart while the file's entry is unchanged; `canopy serve` says so, so
 * that a file that looks authoritative does not surprise the operator.
 */
import type { Endpoint, ServiceSpec } from '../domain/service.js';
import { endpointToJson, serviceSpecToJson } from '../domain/spec.js';
import type { Store } from '../store/store.js';

export interface StoreOverrides {
  /** Endpoints that differ from the file's entry, or that the file lists and the store has not. */
  readonly endpoints: number;
  /** The services they are in, in the file's order. */
  readonly services: readonly string[];
}

/**
 * The file's `services` the store holds otherwise, skipping those named in `written` (the start just wrote
 * them from the file: they hold no API change). Undefined when there are none.
 */
export async function storeOverrides(
  store: Store,
  services: readonly ServiceSpec[],
  written: ReadonlySet<string>,
): Promise<StoreOverrides | undefined> {
  const overridden: string[] = [];
  let endpoints = 0;
  for (const spec of services) {
    if (written.has(spec.name)) continue;
    const stored = await store.get(spec.name);
    if (!stored || stored.owner !== 'file') continue;
    const changed = changedEndpoints(spec, stored.spec);
    if (changed === 0 && sameHead(spec, stored.spec)) continue;
    endpoints += changed;
    overridden.push(spec.name);
  }
  return overridden.length === 0 ? undefined : { endpoints, services: overridden };
}

/** Endpoints compared by address and port: the store need not keep the file's order. */
function changedEndpoints(file: ServiceSpec, stored: ServiceSpec): number {
  const fromFile = new Map(file.endpoints.map((e) => [endpointKey(e), JSON.stringify(endpointToJson(e))]));
  const differing = stored.endpoints.filter((e) => fromFile.get(endpointKey(e)) !== JSON.stringify(endpointToJson(e)));
  const gone = file.endpoints.length - stored.endpoints.filter((e) => fromFile.has(endpointKey(e))).length;
  return differing.length + gone;
}

/** Everything but the endpoints. */
function sameHead(file: ServiceSpec, stored: ServiceSpec): boolean {
  const { endpoints: _f, ...fileHead } = serviceSpecToJson(file);
  const { endpoints: _s, ...storedHead } = serviceSpecToJson(stored);
  return JSON.stringify(storedHead) === JSON.stringify(fileHead);
}

function endpointKey(e: Endpoint): string {
  return `${e.address}:${e.port}`;
}
