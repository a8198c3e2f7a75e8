/**
 * `loadBalancing.loadAware`: how a service's traffic follows the load its
 * clients report (domain/load/load-spill.ts). Validation is data, with field paths.
 */
import { join, type Obj, type Reader } from '../reader.js';

/**
 * `waterfall` fills the client's nearest tier first (its matched node, then
 * each ancestor's rest); `spray` spreads over the client's whole top-scope
 * subtree (its region, with the default scopes) by capacity before spilling
 * further: Traffic Director's WATERFALL_BY_ZONE and SPRAY_TO_REGION.
 */
export type SpillMode = 'waterfall' | 'spray';

export type LoadBalancingMode = SpillMode | 'off';
export const LOAD_BALANCING_MODES: readonly LoadBalancingMode[] = ['waterfall', 'spray', 'off'];

export interface LoadAware {
  /** `off` (the default) keeps today's behaviour: traffic moves between localities on health only. */
  readonly balancing: LoadBalancingMode;
  /** What one healthy endpoint serves, in requests per second. */
  readonly capacityRps: number;
  /** The fraction of capacity to fill before spilling (0 < u <= 1; default 1). */
  readonly utilizationTarget: number;
  /** Auto capacity drain: a locality whose healthy fraction falls below this takes no new traffic (default 0.25; 0 turns it off). */
  readonly drainBelow: number;
}

export const LOAD_AWARE_KEYS = ['balancing', 'capacityRps', 'utilizationTarget', 'drainBelow'];
const MAX_CAPACITY_RPS = 10_000_000;

export function readLoadAware(r: Reader, v: unknown, path: string): LoadAware | undefined {
  const o = r.object(v, path, LOAD_AWARE_KEYS);
  if (!o) return undefined;
  const balancing =
    r.optional(o, 'balancing', path, (x, p) => r.oneOf<LoadBalancingMode>(x, p, LOAD_BALANCING_MODES)) ?? 'off';
  const capacityRps = r.optional(o, 'capacityRps', path, (x, p) => fraction(r, x, p, 0, MAX_CAPACITY_RPS, false));
  if (balancing !== 'off' && capacityRps === undefined && o['capacityRps'] === undefined)
    r.fail(
      join(path, 'capacityRps'),
      `is required with balancing: ${balancing} (requests per second one endpoint serves)`,
    );
  const utilizationTarget = r.optional(o, 'utilizationTarget', path, (x, p) => fraction(r, x, p, 0, 1, false)) ?? 1;
  const drainBelow = r.optional(o, 'drainBelow', path, (x, p) => fraction(r, x, p, 0, 1, true)) ?? 0.25;
  return { balancing, capacityRps: capacityRps ?? 0, utilizationTarget, drainBelow };
}

/** A number in (min, max], or [min, max] when `closed`. */
function fraction(r: Reader, v: unknown, path: string, min: number, max: number, closed: boolean): number | undefined {
  if (typeof v !== 'number' || !Number.isFinite(v)) return r.fail(path, `must be a number, got ${JSON.stringify(v)}`);
  if (v > max || v < min || (!closed && v === min))
    return r.fail(path, `must be ${closed ? 'at least' : 'more than'} ${min} and at most ${max}, got ${v}`);
  return v;
}

export function loadAwareToJson(l: LoadAware): Obj {
  return {
    balancing: l.balancing,
    capacityRps: l.capacityRps,
    utilizationTarget: l.utilizationTarget,
    drainBelow: l.drainBelow,
  };
}

export function isLoadAware(l: LoadAware | undefined): l is LoadAware & { balancing: SpillMode } {
  return l !== undefined && l.balancing !== 'off';
}
