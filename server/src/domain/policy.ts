/**
 * The locality policy: what Canopy adds to a service's tree when its users
 * come from Istio, Kuma or Kubernetes. Each field is optional; a service
 * without one is served from the tree alone. Pure: no I/O.
 *
 * Config form, under `loadBalancing.policy`:
 *   failover:            { rules: [{ from?: [v…], to: { type: any|only|anyExcept|none, values?: [v…] } }], unmatched: last|drop }
 *   failoverPriority:    ["network", "label:team", "label:tier=gold", …]
 *   distribute:          [{ from: "r1/z1/*", to: { "r1/z1/*": 80, "r2": 20 } }]
 *   affinity:            [{ scope: "label:k8s.io/node", weight: 900 }, …]
 *   trafficDistribution: PreferSameNode | PreferSameZone
 *   zoneAware:           { enabled?: true|false, minClusterSize?: n }   (Envoy sidecars only)
 */
import { hasHostnames } from './dns-spec.js';
import { isScope, type Scope } from './locality.js';

export type FailoverTargetType = 'any' | 'only' | 'anyExcept' | 'none';
export const FAILOVER_TARGET_TYPES: readonly FailoverTargetType[] = ['any', 'only', 'anyExcept', 'none'];

export interface FailoverRule {
  /** The client's values (at routingPreference[0]) the rule applies to; absent = every client. */
  readonly from?: readonly string[];
  readonly to: { readonly type: FailoverTargetType; readonly values: readonly string[] };
}

/**
 * Explicit order when leaving the client's value at the first tree level
 * (Istio: region; Kuma: zone): an endpoint elsewhere ranks by the first
 * applicable rule that accepts its value; endpoints no rule accepts go last
 * (Istio) or are dropped (Kuma).
 */
export interface FailoverOrder {
  readonly rules: readonly FailoverRule[];
  readonly unmatched: 'last' | 'drop';
}

/** One failoverPriority entry: compare with the client's value, or with a constant when `value` is set. */
export interface PriorityLabel {
  readonly scope: Scope;
  readonly value?: string;
}

export interface DistributeRule {
  /** A locality pattern "r/z/s"; a `*` segment matches the rest. */
  readonly from: string;
  /** Patterns with the weight shared by the localities each claims, in order. */
  readonly to: readonly { readonly pattern: string; readonly weight: number }[];
}

export interface AffinityTag {
  readonly scope: Scope;
  readonly weight: number;
}

export type TrafficDistribution = 'PreferSameNode' | 'PreferSameZone';
export const TRAFFIC_DISTRIBUTIONS: readonly TrafficDistribution[] = ['PreferSameNode', 'PreferSameZone'];

/**
 * Envoy's zone-aware routing inside priority 0 (Istio's zoneAwareLbSetting):
 * the sidecar's cluster gets `zone_aware_lb_config` instead of locality
 * weights, and Envoy sends each zone the share that keeps it as loaded as the
 * client's own zone, from its local cluster (`local_cluster`, the client's
 * own service: resources/endpoint/local-cluster.ts). `enabled: false` sends routing 0%
 * (Envoy's own zone-aware routing off). It shapes no CLA: the tree and the
 * other fields do (Istio: the region tiers).
 */
export interface ZoneAware {
  readonly enabled: boolean;
  /** Envoy's min_cluster_size: below it zone-aware routing is off; absent = Envoy's 6. */
  readonly minClusterSize?: number;
}

export interface LocalityPolicy {
  readonly failover?: FailoverOrder;
  readonly failoverPriority?: readonly PriorityLabel[];
  readonly distribute?: readonly DistributeRule[];
  readonly affinity?: readonly AffinityTag[];
  readonly trafficDistribution?: TrafficDistribution;
  readonly zoneAware?: ZoneAware;
}

/** Does the policy shape CLAs? (`zoneAware` alone does not: it is the sidecar's cluster setting.) */
export function hasPolicy(p: LocalityPolicy | undefined): p is LocalityPolicy {
  return p !== undefined && Object.keys(p).some((k) => k !== 'zoneAware');
}

/** Kuma's default affinity weights: 9·10^(n−i−1), so 900/90/9 for three tags. */
export function defaultAffinityWeight(index: number, count: number): number {
  return 9 * 10 ** (count - index - 1);
}

/**
 * Does a locality "r/z/s" match an Istio-style pattern ("*", "r1/*", "r1/z1",
 * or "*" then "z1": zone z1 in any region)? As Istio's LocalityMatch: each segment is compared on its own, a
 * `*` segment matches any value there, and missing segments match anything.
 */
export function localityMatches(locality: readonly string[], pattern: string): boolean {
  const segs = pattern.split('/');
  for (let i = 0; i < segs.length; i++) {
    if (segs[i] === '*') continue;
    if ((locality[i] ?? '') !== segs[i]) return false;
  }
  return true;
}

export function acceptsValue(to: FailoverRule['to'], value: string): boolean {
  switch (to.type) {
    case 'any':
      return true;
    case 'only':
      return to.values.includes(value);
    case 'anyExcept':
      return !to.values.includes(value);
    case 'none':
      return false;
  }
}

/**
 * Named in a tree's unsupported_policy when the service has hostname
 * endpoints: the kernel datapath rewrites a connect to an address and cannot
 * resolve a name, so an agent refuses the whole service (NACK naming it)
 * rather than serve it without those endpoints.
 */
export const KERNEL_HOSTNAMES = 'hostname endpoints';

/**
 * The policy features the kernel tree cannot carry (it holds scopes, a mode
 * and the tree). trafficDistribution is the tree itself and reaches the
 * kernel; the overprovisioning factor does not matter there (no spillover by
 * health). An agent applies the plain tree for the rest, or NACKs naming them.
 */
export function kernelUnsupported(
  p: LocalityPolicy | undefined,
  tree?: {
    readonly nodes: readonly { readonly depth: number; readonly value: string }[];
    readonly endpoints?: readonly { readonly address: string }[];
  },
): string[] {
  const out: string[] = [];
  // Not a policy gap but a refusal: the kernel connects to addresses and resolves no names (KERNEL_HOSTNAMES).
  if (tree?.endpoints && hasHostnames(tree.endpoints)) out.push(KERNEL_HOSTNAMES);
  if (!p) return out;
  // A level some endpoint has no value at is skipped by trafficDistribution; the kernel would still use it.
  if (p.trafficDistribution && tree?.nodes.some((n) => n.depth > 0 && n.value === '')) out.push('trafficDistribution');
  if (p.failover) out.push('failover');
  if (p.failoverPriority) out.push('failoverPriority');
  if (p.distribute) out.push('distribute');
  if (p.affinity) out.push('affinity');
  return out;
}

export function policyToJson(p: LocalityPolicy): Record<string, unknown> {
  return {
    ...(p.failover
      ? {
          failover: {
            rules: p.failover.rules.map((r) => ({
              ...(r.from ? { from: [...r.from] } : {}),
              to: { type: r.to.type, ...(r.to.values.length ? { values: [...r.to.values] } : {}) },
            })),
            unmatched: p.failover.unmatched,
          },
        }
      : {}),
    ...(p.failoverPriority
      ? { failoverPriority: p.failoverPriority.map((l) => (l.value !== undefined ? `${l.scope}=${l.value}` : l.scope)) }
      : {}),
    ...(p.distribute
      ? {
          distribute: p.distribute.map((d) => ({
            from: d.from,
            to: Object.fromEntries(d.to.map((t) => [t.pattern, t.weight])),
          })),
        }
      : {}),
    ...(p.affinity ? { affinity: p.affinity.map((a) => ({ scope: a.scope, weight: a.weight })) } : {}),
    ...(p.trafficDistribution ? { trafficDistribution: p.trafficDistribution } : {}),
    ...(p.zoneAware
      ? {
          zoneAware: {
            enabled: p.zoneAware.enabled,
            ...(p.zoneAware.minClusterSize !== undefined ? { minClusterSize: p.zoneAware.minClusterSize } : {}),
          },
        }
      : {}),
  };
}

export function samePolicy(a: LocalityPolicy | undefined, b: LocalityPolicy | undefined): boolean {
  return JSON.stringify(a ? policyToJson(a) : {}) === JSON.stringify(b ? policyToJson(b) : {});
}

/** "scope" or "scope=value" → a PriorityLabel; undefined when the scope is not one. */
export function parsePriorityLabel(text: string): PriorityLabel | undefined {
  const eq = text.indexOf('=');
  const scope = eq < 0 ? text : text.slice(0, eq);
  if (!isScope(scope)) return undefined;
  return eq < 0 ? { scope } : { scope, value: text.slice(eq + 1) };
}
