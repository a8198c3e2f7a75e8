/**
 * The load-aware service the load-aware e2e tests run (load-aware-envoy, -restart, -replicas), and the two
 * places they read its weights from: Canopy's `/debug/load/SERVICE` (the weights it plans for each client
 * node) and an Envoy's `/config_dump?include_eds` (the weights Envoy holds). Localities are written
 * "region/zone/subzone", as both places key them.
 */
import assert from 'node:assert/strict';
import type { Backend } from '../../server/src/demo/backend.js';
import { parseLocality } from '../../server/src/domain/locality.js';
import type { CanopyProcess } from './canopy-process.js';

type Obj = Record<string, unknown>;
/** Locality "r1/za/s" → weight. */
export type Weights = Record<string, number>;

/**
 * `echo`, failover over region, zone and subzone, load-aware by `waterfall` at `capacityRps` per endpoint:
 * one endpoint per backend, at the locality of the same index.
 */
export function waterfallEcho(
  backends: readonly Backend[],
  localities: readonly string[],
  capacityRps: number,
  port?: number,
): Record<string, unknown> {
  return {
    name: 'echo',
    ...(port === undefined ? {} : { port, protocol: 'grpc' }),
    loadBalancing: {
      mode: 'failover',
      routingPreference: ['region', 'zone', 'subzone'],
      loadAware: { balancing: 'waterfall', capacityRps },
    },
    endpoints: backends.map((b, i) => ({ address: b.address, port: b.port, locality: parseLocality(localities[i]!) })),
  };
}

/** `locality`'s share of all the weights; 0 when there are none. */
export function shareOf(weights: Weights, locality: string): number {
  const total = Object.values(weights).reduce((a, b) => a + b, 0);
  return total > 0 ? (weights[locality] ?? 0) / total : 0;
}

/** What `/debug/load/SERVICE` says, as far as the tests read it. */
export interface LoadDebug {
  /** Bumped on every change of the weights. */
  readonly epoch: number;
  readonly clientNodes?: readonly {
    readonly path: string;
    readonly offeredRps: number;
    readonly weights: Weights;
  }[];
  /** Replicas on etcd: this one and the load records it counts. */
  readonly shared?: {
    readonly replica: string;
    readonly period: number;
    readonly replicas: readonly { readonly replica: string; readonly offeredRps: number }[];
  };
}

export async function debugLoad(canopy: CanopyProcess, service = 'echo'): Promise<LoadDebug> {
  const r = await canopy.admin('GET', `/debug/load/${service}`);
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body as LoadDebug;
}

/** The client node at `path` ("r1/za/s") in a /debug/load answer. */
export const clientNode = (d: LoadDebug, path: string) => d.clientNodes?.find((n) => n.path === path);

/** Envoy's priority-0 locality weights of a cluster, from /config_dump?include_eds. */
export function priorityZeroWeights(dump: Obj, cluster: string): Weights {
  const out: Weights = {};
  for (const c of dump['configs'] as Obj[])
    for (const d of (c['dynamic_endpoint_configs'] as Obj[] | undefined) ?? []) {
      const cla = d['endpoint_config'] as Obj;
      if (cla['cluster_name'] !== cluster) continue;
      for (const g of (cla['endpoints'] as Obj[] | undefined) ?? []) {
        if (Number(g['priority'] ?? 0) !== 0) continue;
        const l = (g['locality'] ?? {}) as Obj;
        const key = [l['region'], l['zone'], l['sub_zone']].map((v) => String(v ?? '')).join('/');
        // /config_dump prints a UInt32Value as a plain number.
        const w = g['load_balancing_weight'];
        out[key] = Number(typeof w === 'object' && w !== null ? (w as Obj)['value'] : (w ?? 0));
      }
    }
  return out;
}
