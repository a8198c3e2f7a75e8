/**
 * `loadBalancing.policy` in config and admin input → LocalityPolicy, checked
 * with field paths like the rest of the spec (domain/reader.ts's Reader).
 */
import {
  defaultAffinityWeight,
  FAILOVER_TARGET_TYPES,
  parsePriorityLabel,
  TRAFFIC_DISTRIBUTIONS,
  type AffinityTag,
  type DistributeRule,
  type FailoverOrder,
  type FailoverRule,
  type FailoverTargetType,
  type LocalityPolicy,
  type PriorityLabel,
  type TrafficDistribution,
  type ZoneAware,
} from './policy.js';
import { isScope, MAX_SCOPES, type Scope } from './locality.js';
import type { LoadBalancing } from './service.js';
import { describe, isObject, join, type Reader } from './reader.js';

const POLICY_KEYS = ['failover', 'failoverPriority', 'distribute', 'affinity', 'trafficDistribution', 'zoneAware'];
const ZONE_AWARE_KEYS = ['enabled', 'minClusterSize'];
const MAX_WEIGHT = 1_000_000;
const MAX_RULES = 1000;
/** The routingPreference each trafficDistribution needs: node → zone → region, as tree levels. */
const TRAFFIC_SCOPES: Readonly<Record<TrafficDistribution, readonly (readonly Scope[])[]>> = {
  PreferSameZone: [['zone'], ['region', 'zone']],
  PreferSameNode: [
    ['zone', 'node'],
    ['region', 'zone', 'node'],
  ],
};

export function readPolicy(r: Reader, v: unknown, path: string, lb: LoadBalancing): LocalityPolicy | undefined {
  const o = r.object(v, path, POLICY_KEYS);
  if (!o) return undefined;
  const failover = r.optional(o, 'failover', path, (x, p) => readFailover(r, x, p));
  const failoverPriority = r.optional(o, 'failoverPriority', path, (x, p) => readPriorityLabels(r, x, p));
  const distribute = r.optional(o, 'distribute', path, (x, p) => readDistribute(r, x, p));
  const affinity = r.optional(o, 'affinity', path, (x, p) => readAffinity(r, x, p));
  const trafficDistribution = r.optional(o, 'trafficDistribution', path, (x, p) =>
    r.oneOf<TrafficDistribution>(x, p, TRAFFIC_DISTRIBUTIONS),
  );
  const zoneAware = r.optional(o, 'zoneAware', path, (x, p) => readZoneAware(r, x, p));
  if (zoneAware && distribute)
    r.fail(
      join(path, 'zoneAware'),
      'cannot be combined with distribute (Envoy takes zone-aware routing or locality weights)',
    );
  if (failover && lb.mode === 'strict') {
    r.fail(join(path, 'failover'), 'has no effect in strict mode (only the client’s own leaf is served)');
  }
  if (distribute && affinity) {
    r.fail(join(path, 'affinity'), 'cannot be combined with distribute (both set the locality weights)');
  }
  if (trafficDistribution) {
    const allowed = TRAFFIC_SCOPES[trafficDistribution];
    const rp = lb.routingPreference;
    if (lb.mode !== 'failover') r.fail(join(path, 'trafficDistribution'), `needs mode failover, got ${lb.mode}`);
    if (!allowed.some((a) => a.length === rp.length && a.every((s, i) => s === rp[i]))) {
      r.fail(
        join(path, 'trafficDistribution'),
        `${trafficDistribution} needs routingPreference ${allowed.map((a) => `[${a.join(', ')}]`).join(' or ')}, got [${rp.join(', ')}]`,
      );
    }
  }
  return {
    ...(failover ? { failover } : {}),
    ...(failoverPriority ? { failoverPriority } : {}),
    ...(distribute ? { distribute } : {}),
    ...(affinity ? { affinity } : {}),
    ...(trafficDistribution ? { trafficDistribution } : {}),
    ...(zoneAware ? { zoneAware } : {}),
  };
}

function readZoneAware(r: Reader, v: unknown, path: string): ZoneAware | undefined {
  const o = r.object(v, path, ZONE_AWARE_KEYS);
  if (!o) return undefined;
  const enabled = r.optional(o, 'enabled', path, r.bool) ?? true;
  const minClusterSize = r.optional(o, 'minClusterSize', path, (x, p) => r.int(x, p, 0, MAX_WEIGHT));
  return { enabled, ...(minClusterSize !== undefined ? { minClusterSize } : {}) };
}

function readFailover(r: Reader, v: unknown, path: string): FailoverOrder | undefined {
  const o = r.object(v, path, ['rules', 'unmatched']);
  if (!o) return undefined;
  const rules: FailoverRule[] = [];
  const raw = o['rules'];
  if (!Array.isArray(raw)) return r.fail(join(path, 'rules'), `must be a list of rules, got ${describe(raw)}`);
  if (raw.length > MAX_RULES)
    return r.fail(join(path, 'rules'), `must have at most ${MAX_RULES} rules, got ${raw.length}`);
  raw.forEach((x, i) => {
    const p = `${join(path, 'rules')}[${i}]`;
    const ro = r.object(x, p, ['from', 'to']);
    if (!ro) return;
    const from = r.optional(ro, 'from', p, (f, fp) => readStrings(r, f, fp));
    const to = readTarget(r, ro['to'], join(p, 'to'));
    if (to) rules.push(from ? { from, to } : { to });
  });
  const unmatched = r.optional(o, 'unmatched', path, (x, p) => r.oneOf(x, p, ['last', 'drop'] as const)) ?? 'last';
  return { rules, unmatched };
}

function readTarget(r: Reader, v: unknown, path: string): FailoverRule['to'] | undefined {
  const o = r.object(v, path, ['type', 'values']);
  if (!o) return undefined;
  const type = r.oneOf<FailoverTargetType>(o['type'], join(path, 'type'), FAILOVER_TARGET_TYPES);
  const values = r.optional(o, 'values', path, (x, p) => readStrings(r, x, p)) ?? [];
  if ((type === 'only' || type === 'anyExcept') && values.length === 0) {
    r.fail(join(path, 'values'), `${type} needs at least one value`);
  }
  return type ? { type, values } : undefined;
}

function readStrings(r: Reader, v: unknown, path: string): string[] | undefined {
  if (!Array.isArray(v)) return r.fail(path, `must be a list of strings, got ${describe(v)}`);
  const out: string[] = [];
  v.forEach((s, i) => {
    const x = r.string(s, `${path}[${i}]`);
    if (x !== undefined) out.push(x);
  });
  return out;
}

function readPriorityLabels(r: Reader, v: unknown, path: string): PriorityLabel[] | undefined {
  if (!Array.isArray(v))
    return r.fail(path, `must be a list of scopes ("zone", "label:team", "label:tier=gold"), got ${describe(v)}`);
  if (v.length < 1 || v.length > MAX_SCOPES)
    return r.fail(path, `must have 1 to ${MAX_SCOPES} entries, got ${v.length}`);
  const out: PriorityLabel[] = [];
  v.forEach((x, i) => {
    const p = `${path}[${i}]`;
    const label = typeof x === 'string' ? parsePriorityLabel(x) : undefined;
    if (!label)
      r.fail(
        p,
        `must be a scope or scope=value (network, region, zone, subzone, node, cluster, label:<key>), got ${describe(x)}`,
      );
    else if (out.some((l) => l.scope === label.scope)) r.fail(p, `duplicate scope "${label.scope}"`);
    else out.push(label);
  });
  return out;
}

function readDistribute(r: Reader, v: unknown, path: string): DistributeRule[] | undefined {
  if (!Array.isArray(v)) return r.fail(path, `must be a list of {from, to} rules, got ${describe(v)}`);
  const out: DistributeRule[] = [];
  v.forEach((x, i) => {
    const p = `${path}[${i}]`;
    const o = r.object(x, p, ['from', 'to']);
    if (!o) return;
    const from = r.string(o['from'], join(p, 'from'));
    const rawTo = o['to'];
    if (!isObject(rawTo) || Object.keys(rawTo).length === 0) {
      r.fail(join(p, 'to'), `must map locality patterns to weights, got ${describe(rawTo)}`);
      return;
    }
    const to = Object.entries(rawTo).map(([pattern, w]) => ({
      pattern,
      weight: r.int(w, join(join(p, 'to'), pattern), 1, MAX_WEIGHT) ?? 1,
    }));
    if (from !== undefined) out.push({ from, to });
  });
  return out;
}

function readAffinity(r: Reader, v: unknown, path: string): AffinityTag[] | undefined {
  if (!Array.isArray(v) || v.length === 0)
    return r.fail(path, `must be a non-empty list of {scope, weight?}, got ${describe(v)}`);
  const out: AffinityTag[] = [];
  v.forEach((x, i) => {
    const p = `${path}[${i}]`;
    const o = r.object(x, p, ['scope', 'weight']);
    if (!o) return;
    const scope = o['scope'];
    if (!isScope(scope)) {
      r.fail(
        join(p, 'scope'),
        `must be network, region, zone, subzone, node, cluster or label:<key>, got ${describe(scope)}`,
      );
      return;
    }
    const weight =
      r.optional(o, 'weight', p, (w, wp) => r.int(w, wp, 1, MAX_WEIGHT)) ?? defaultAffinityWeight(i, v.length);
    out.push({ scope, weight });
  });
  return out;
}
