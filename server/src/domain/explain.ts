/**
 * Why a client gets the CLA it gets: every endpoint's priority and the rule
 * that put it there (or left it out), each locality's weight and the share of
 * new requests a gRPC client sends it, and the tree node the CLA is cached
 * under. A proposed policy is explained the same way and compared.
 */
import { planCla } from './cla-planners.js';
import { envoyHostSets, envoyShares, type EnvoyPriorityView } from './envoy-lb.js';
import { buildLoadCla } from './load/load-cla.js';
import type { LoadExplain } from './load/load-explain.js';
import { formatLocality, type Locality, type Placement } from './locality.js';
import type { ServiceState } from './mesh.js';
import { resolvePolicy, type PolicyOutcome } from './policy-cla.js';
import { endpointKey, type Health } from './service.js';

export interface LocalityView {
  readonly region: string;
  readonly zone: string;
  readonly subzone: string;
}

export interface ExplainView {
  readonly service: string;
  readonly client: {
    readonly locality: LocalityView;
    readonly network: string;
    readonly node: string;
    readonly cluster: string;
    readonly labels: Readonly<Record<string, string>>;
  };
  readonly cacheKey: string;
  readonly treeNode: readonly string[];
  readonly overprovisioningFactor: number;
  /** loadBalancing.reach, when set: endpoints past it are left out with a reason. */
  readonly reach?: { readonly minEndpoints: number };
  readonly endpoints: readonly {
    readonly address: string;
    readonly port: number;
    readonly locality: LocalityView;
    readonly health: Health;
    readonly weight: number;
    readonly priority: number | null;
    readonly reason: string;
  }[];
  readonly localities: readonly {
    readonly locality: LocalityView;
    readonly priority: number;
    readonly weight: number;
    readonly healthyEndpoints: number;
    readonly share: number;
  }[];
  /** A load-aware service: reported load against capacity per locality and this client node's spill, with why. */
  readonly load?: LoadExplain;
  /**
   * An Envoy sidecar there: what it is sent (unhealthy endpoints included, per `unhealthy`) run through
   * Envoy's priority, panic and locality-weight arithmetic (envoy-lb.ts); `shares` per `address:port`.
   */
  readonly envoy: { readonly priorities: readonly EnvoyPriorityView[]; readonly shares: Record<string, number> };
}

const view_ = (l: Locality): LocalityView => ({ region: l.region, zone: l.zone, subzone: l.subzone });

/** The CLA cache key for this client, as ClaCache.lookup computes it. */
export function cacheKeyFor(service: ServiceState, client: Placement): string {
  return planCla(service, client).key;
}

interface EndpointStats {
  readonly priority: number | null;
  readonly localityWeight: number;
  readonly localityShare: number;
}

export interface ExplainChange {
  readonly endpoint: string;
  readonly current: EndpointStats;
  readonly proposed: EndpointStats;
}

export function explain(service: ServiceState, client: Placement): ExplainView {
  return analyse(service, client).view;
}

/** A service-wide setting the proposal changes (the overprovisioning factor changes every priority's spill). */
export interface SettingChange {
  readonly field: string;
  readonly current: unknown;
  readonly proposed: unknown;
}

function settingChanges(a: ServiceState, b: ServiceState): SettingChange[] {
  const la = a.spec.loadBalancing;
  const lb = b.spec.loadBalancing;
  const fields: [string, unknown, unknown][] = [
    ['mode', la.mode, lb.mode],
    ['routingPreference', la.routingPreference.join(','), lb.routingPreference.join(',')],
    ['overprovisioningFactor', la.overprovisioningFactor, lb.overprovisioningFactor],
    ['reach.minEndpoints', la.reach?.minEndpoints ?? null, lb.reach?.minEndpoints ?? null],
    // Envoy's zone-aware routing moves load between the zones of priority 0 without moving any endpoint.
    ['policy.zoneAware', JSON.stringify(la.policy?.zoneAware ?? null), JSON.stringify(lb.policy?.zoneAware ?? null)],
  ];
  return fields.filter(([, x, y]) => x !== y).map(([field, current, proposed]) => ({ field, current, proposed }));
}

/**
 * The explanation under the current and a proposed service, the endpoints
 * whose place would change, the service-wide settings that would, and
 * `warnings` (e.g. the proposal was written for another service).
 */
export function explainChange(
  current: ServiceState,
  proposed: ServiceState,
  client: Placement,
  warnings: readonly string[] = [],
) {
  const a = analyse(current, client);
  const b = analyse(proposed, client);
  const none: EndpointStats = { priority: null, localityWeight: 0, localityShare: 0 };
  const diff: ExplainChange[] = [];
  for (const [endpoint, before] of a.stats) {
    const after = b.stats.get(endpoint) ?? none;
    if (
      before.priority !== after.priority ||
      before.localityWeight !== after.localityWeight ||
      Math.abs(before.localityShare - after.localityShare) > 1e-9
    ) {
      diff.push({ endpoint, current: before, proposed: after });
    }
  }
  return {
    current: a.view,
    proposed: b.view,
    diff,
    settings: settingChanges(current, proposed),
    warnings: [...warnings],
  };
}

function analyse(service: ServiceState, client: Placement): { view: ExplainView; stats: Map<string, EndpointStats> } {
  const lb = service.spec.loadBalancing;
  const resolved = resolvePolicy(service.name, service.tree, lb, client, { reasons: true });
  // A load-aware client node with weights this interval is sent its load CLA (load-explain.ts says why).
  const outcome = withLoadWeights(service, resolved);
  const verdicts = new Map(outcome.verdicts.map((v) => [endpointKey(v.endpoint), v]));
  // gRPC ignores the overprovisioning factor and takes the first priority whose children are ready; in
  // it, localities split by weight. Every endpoint in a CLA is healthy, so priority 0 takes everything.
  const p0Weight = outcome.cla.groups.reduce((s, g) => s + (g.priority === 0 ? g.weight : 0), 0);
  const shareOf = (priority: number, weight: number) => (priority === 0 && p0Weight > 0 ? weight / p0Weight : 0);
  const stats = new Map<string, EndpointStats>();
  for (const e of service.spec.endpoints) {
    const v = verdicts.get(endpointKey(e));
    stats.set(endpointKey(e), {
      priority: v?.priority ?? null,
      localityWeight: v?.weight ?? 0,
      localityShare: v && v.priority !== null ? shareOf(v.priority, v.weight) : 0,
    });
  }
  const view: ExplainView = {
    service: service.name,
    client: {
      locality: view_(client.locality),
      network: client.network,
      node: client.node,
      cluster: client.cluster,
      labels: Object.fromEntries(Object.entries(client.labels)),
    },
    cacheKey: cacheKeyFor(service, client),
    treeNode: outcome.matched.path(),
    overprovisioningFactor: lb.overprovisioningFactor,
    ...(lb.reach ? { reach: { minEndpoints: lb.reach.minEndpoints } } : {}),
    endpoints: service.spec.endpoints.map((e) => {
      const v = verdicts.get(endpointKey(e));
      return {
        address: e.address,
        port: e.port,
        locality: view_(e.locality),
        health: e.health,
        weight: e.weight,
        priority: v?.priority ?? null,
        reason: v
          ? v.priority === null
            ? v.reason
            : `priority ${v.priority} in locality ${formatLocality(v.locality)} (weight ${v.weight}): ${v.reason}`
          : `${e.health}: left out (only healthy endpoints receive new traffic)`,
      };
    }),
    envoy: envoyView(service, client, outcome),
    localities: outcome.cla.groups.map((g) => ({
      locality: view_(g.locality),
      priority: g.priority,
      weight: g.weight,
      healthyEndpoints: g.endpoints.length,
      share: shareOf(g.priority, g.weight),
    })),
  };
  return { view, stats };
}

function envoyView(service: ServiceState, client: Placement, outcome: PolicyOutcome): ExplainView['envoy'] {
  const r = envoyShares(envoyHostSets(service, client, outcome.cla), service.spec.loadBalancing.overprovisioningFactor);
  return { priorities: r.priorities, shares: Object.fromEntries(r.shares) };
}

/** The outcome as the client is sent it: with its node's load weights, priority 0 by share of its load. */
function withLoadWeights(service: ServiceState, outcome: PolicyOutcome): PolicyOutcome {
  const weights = service.load?.weights.get(outcome.matched.id);
  if (!weights) return outcome;
  const cla = buildLoadCla(service.name, service.tree, service.spec.loadBalancing, outcome.matched, weights);
  const verdicts = cla.groups.flatMap((g) =>
    g.endpoints.map((endpoint) => ({
      endpoint,
      priority: g.priority,
      locality: g.locality,
      weight: g.weight,
      reason:
        g.priority === 0
          ? "load-aware: this client node's share of load placed here (see load)"
          : 'load-aware: failover behind the localities its load is placed on',
    })),
  );
  return { ...outcome, cla, verdicts };
}
