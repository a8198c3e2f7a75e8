/** Small fixture builders for pure-logic tests. */
import { parseLocality, type Scope } from '../../src/domain/locality.js';
import type { Endpoint, Health, LbMode, LoadBalancing, ServiceSpec } from '../../src/domain/service.js';

let nextHost = 1;

export interface EndpointInit {
  readonly locality?: string;
  readonly address?: string;
  readonly port?: number;
  readonly network?: string;
  readonly node?: string;
  readonly cluster?: string;
  readonly labels?: Record<string, string>;
  readonly health?: Health;
  readonly weight?: number;
}

/** An endpoint at "r/z/s"; each call gets a fresh address unless one is given. */
export function ep(init: EndpointInit = {}): Endpoint {
  const n = nextHost++;
  return {
    address: init.address ?? `10.${(n >> 16) & 255}.${(n >> 8) & 255}.${n & 255}`,
    port: init.port ?? 8080,
    locality: parseLocality(init.locality),
    network: init.network ?? '',
    node: init.node ?? '',
    cluster: init.cluster ?? '',
    labels: init.labels ?? {},
    health: init.health ?? 'healthy',
    weight: init.weight ?? 1,
  };
}

export function lb(
  mode: LbMode = 'failover',
  routingPreference: readonly Scope[] = ['region', 'zone', 'subzone'],
): LoadBalancing {
  return { mode, routingPreference, crossNetworkFailover: true, overprovisioningFactor: 140 };
}

export function service(name: string, endpoints: readonly Endpoint[], balancing: LoadBalancing = lb()): ServiceSpec {
  return { name, loadBalancing: balancing, endpoints };
}

export function client(init: Omit<EndpointInit, 'address' | 'port' | 'health' | 'weight'> = {}) {
  const { address: _a, port: _p, health: _h, weight: _w, ...placement } = ep(init);
  return placement;
}
