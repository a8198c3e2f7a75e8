/**
 * The service model → its canonical JSON form (the admin API's answers, the
 * store's records, `canopy get`): what parseServiceSpec (spec.ts) accepts
 * back unchanged.
 */
import { dnsToJson } from './dns-spec.js';
import { loadAwareToJson } from './load/load-aware-spec.js';
import { policyToJson } from './policy.js';
import type { Obj } from './reader.js';
import type { Locality } from './locality.js';
import type { Endpoint, ServiceSpec } from './service.js';
import { sidecarSettingsToJson } from './sidecar-spec.js';

/** The canonical JSON form of a spec; parseServiceSpec accepts it back unchanged. */
export function serviceSpecToJson(spec: ServiceSpec): Obj {
  const lb = spec.loadBalancing;
  return {
    name: spec.name,
    ...(spec.port !== undefined ? { port: spec.port } : {}),
    ...(spec.vip !== undefined ? { vip: spec.vip } : {}),
    ...(spec.vips !== undefined ? { vips: spec.vips } : {}),
    loadBalancing: {
      mode: lb.mode,
      routingPreference: [...lb.routingPreference],
      crossNetworkFailover: lb.crossNetworkFailover,
      overprovisioningFactor: lb.overprovisioningFactor,
      ...(lb.policy ? { policy: policyToJson(lb.policy) } : {}),
      ...(lb.reach ? { reach: { minEndpoints: lb.reach.minEndpoints } } : {}),
      ...(lb.loadAware ? { loadAware: loadAwareToJson(lb.loadAware) } : {}),
    },
    endpoints: spec.endpoints.map(endpointToJson),
    ...(spec.dns ? { dns: dnsToJson(spec.dns) } : {}),
    ...sidecarSettingsToJson(spec),
  };
}

export function endpointToJson(e: Endpoint): Obj {
  return {
    address: e.address,
    port: e.port,
    locality: { region: e.locality.region, zone: e.locality.zone, subzone: e.locality.subzone },
    ...(e.network ? { network: e.network } : {}),
    ...(e.node ? { node: e.node } : {}),
    ...(e.cluster ? { cluster: e.cluster } : {}),
    labels: Object.fromEntries(Object.entries(e.labels)),
    health: e.health,
    weight: e.weight,
  };
}

/** `JSON.stringify(s)` for a string, faster: IP literals, hostnames and most locality values need no escaping. */
export function jsonString(s: string): string {
  return PLAIN.test(s) ? `"${s}"` : JSON.stringify(s);
}
const PLAIN = /^[\w.:-]*$/;

/** A locality's JSON by object: endpoints read from one list share their localities' objects. */
const localityJson = new WeakMap<Locality, string>();

/** `JSON.stringify(endpointToJson(e))`, byte for byte, without building the object. */
export function endpointJson(e: Endpoint): string {
  const l = e.locality;
  let loc = localityJson.get(l);
  if (loc === undefined) {
    loc = `{"region":${jsonString(l.region)},"zone":${jsonString(l.zone)},"subzone":${jsonString(l.subzone)}}`;
    localityJson.set(l, loc);
  }
  let out = `{"address":${jsonString(e.address)},"port":${e.port},"locality":${loc}`;
  if (e.network) out += `,"network":${jsonString(e.network)}`;
  if (e.node) out += `,"node":${jsonString(e.node)}`;
  if (e.cluster) out += `,"cluster":${jsonString(e.cluster)}`;
  return `${out},"labels":${JSON.stringify(e.labels)},"health":${jsonString(e.health)},"weight":${e.weight}}`;
}
