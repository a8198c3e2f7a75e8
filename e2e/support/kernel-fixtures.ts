/** Small builders for the kernel tests: services and placements from short strings. */
import { parseLocality, type Placement } from '../../server/src/domain/locality.js';
import type { Endpoint, LbMode, ServiceSpec } from '../../server/src/domain/service.js';

export function placementOf(locality: string, labels: Record<string, string> = {}): Placement {
  return { locality: parseLocality(locality), network: '', node: '', cluster: '', labels };
}

/** A service on vip:port whose backends are [id, ip, "region/zone/subzone"] (the id is not part of the spec). */
export function spec(
  name: string,
  vip: string,
  port: number,
  mode: LbMode,
  backends: readonly (readonly [string, string, string])[],
): ServiceSpec {
  return {
    name,
    vip,
    port,
    loadBalancing: {
      mode,
      routingPreference: ['region', 'zone', 'subzone'],
      crossNetworkFailover: false,
      overprovisioningFactor: 140,
    },
    endpoints: backends.map(([, address, locality]): Endpoint => ({
      address,
      port,
      health: 'healthy',
      weight: 1,
      ...placementOf(locality),
    })),
  };
}
