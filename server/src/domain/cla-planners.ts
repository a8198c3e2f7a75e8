/**
 * One planner per balancing mode, each answering a client with the CLA
 * cache key and the CLA from the same match of the tree, so the two cannot
 * disagree: clients with equal keys are given equal CLAs. Each planner walks
 * the tree once (`tree.matchPlacement`, inside `matchPlan`/`matchPolicy`),
 * makes the key from that match at once (a cache hit costs this) and keeps
 * the match for the CLA, built only on a miss. The CLA cache
 * (cla-cache.ts) and the explain view (explain.ts) ask `planCla`; neither
 * pairs key and CLA functions itself any more. The shape follows grpc-js-xds's
 * load-balancing policy registry: an ordered list of named planners, the
 * first that takes the service answers.
 *
 * - load-aware (load/): a client node with weights this interval gets its
 *   load CLA, keyed by the node it matched and the weights' epoch;
 * - policy (policy-cla.ts): a service with a locality policy, keyed by the
 *   tree node plus the client attributes the policy reads;
 * - failover (priorities.ts): the plain modes (failover, strict, random),
 *   keyed by the tree nodes the client's plan reaches.
 */
import { buildCla, type Cla } from './cla.js';
import { buildLoadCla } from './load/load-cla.js';
import type { Placement } from './locality.js';
import type { ServiceState } from './mesh.js';
import { hasPolicy } from './policy.js';
import { matchPolicy, policyKey, policyOutcome } from './policy-cla.js';
import { matchPlan, planKey, planOf } from './priorities.js';

/** A client's CLA as a planner answers it. */
export interface ClaPlan {
  /** The planner that answered. */
  readonly planner: ClaPlannerName;
  /** The cache key: equal for two clients of a service only when their CLAs are equal. Cheap (a hit costs this). */
  readonly key: string;
  /** Builds the CLA (on a cache miss), from the match the key was made from. */
  cla(): Cla;
}

export type ClaPlannerName = 'load-aware' | 'policy' | 'failover';

export interface ClaPlanner {
  readonly name: ClaPlannerName;
  /** The client's plan, or undefined when this planner does not take the service (the next one is asked). */
  plan(service: ServiceState, client: Placement): ClaPlan | undefined;
}

export const loadAwarePlanner: ClaPlanner = {
  name: 'load-aware',
  plan(service, client) {
    const load = service.load;
    if (!load) return undefined;
    const node = service.tree.matchPlacement(client);
    const weights = load.weights.get(node.id);
    // A node without weights this interval gets the plain CLA.
    if (!weights) return undefined;
    return {
      planner: 'load-aware',
      key: `L${node.id}#${load.epoch}`,
      cla: () => buildLoadCla(service.name, service.tree, service.spec.loadBalancing, node, weights),
    };
  },
};

export const policyPlanner: ClaPlanner = {
  name: 'policy',
  plan(service, client) {
    const lb = service.spec.loadBalancing;
    if (!hasPolicy(lb.policy)) return undefined;
    const match = matchPolicy(service.tree, lb, client);
    return { planner: 'policy', key: policyKey(match), cla: () => policyOutcome(service.name, match).cla };
  },
};

export const failoverPlanner = {
  name: 'failover',
  plan(service: ServiceState, client: Placement): ClaPlan {
    const lb = service.spec.loadBalancing;
    const match = matchPlan(service.tree, lb, client);
    return {
      planner: 'failover',
      key: planKey(match),
      cla: () => buildCla(service.name, service.tree, lb, planOf(match)),
    };
  },
} satisfies ClaPlanner;

/** In the order they are asked: the last, failover, takes every service. */
export const CLA_PLANNERS: readonly ClaPlanner[] = [loadAwarePlanner, policyPlanner, failoverPlanner];

/** The client's CLA plan from the first planner that takes the service. */
export function planCla(service: ServiceState, client: Placement): ClaPlan {
  return (
    loadAwarePlanner.plan(service, client) ??
    policyPlanner.plan(service, client) ??
    failoverPlanner.plan(service, client)
  );
}
