/**
 * Istio → Canopy: a DestinationRule's `trafficPolicy.loadBalancer.localityLbSetting`
 * and `outlierDetection`, with the endpoints of the ServiceEntry for the same
 * host (its `endpoints`: address, locality "r/z/s", network, labels, weight).
 *
 * Istio's rules kept: `enabled: false` means no locality setting; failover and
 * failoverPriority only act when outlier detection is configured (without it
 * every endpoint is priority 0, and the import says so); distribute always
 * applies and cannot be combined with failover; failoverPriority alone does
 * not rank by region/zone (only the labels it lists).
 */
import {
  describe,
  Findings,
  join,
  list,
  nameOf,
  obj,
  readMetadata,
  str,
  strings,
  type Obj,
  type PolicyDocument,
} from './documents.js';
import { readServiceEntry, type ServiceEntryEndpoints } from './istio-service-entry.js';

/** Istio's topology labels, as Canopy's built-in scopes. */
export const ISTIO_SCOPES: Readonly<Record<string, string>> = {
  'topology.istio.io/network': 'network',
  'topology.kubernetes.io/region': 'region',
  'topology.kubernetes.io/zone': 'zone',
  'topology.istio.io/subzone': 'subzone',
  'topology.istio.io/cluster': 'cluster',
  'kubernetes.io/hostname': 'node',
};

const LOCALITY_LABELS = ['topology.kubernetes.io/region', 'topology.kubernetes.io/zone', 'topology.istio.io/subzone'];

export function isIstio(doc: Obj): boolean {
  return typeof doc['apiVersion'] === 'string' && doc['apiVersion'].startsWith('networking.istio.io/');
}

interface Endpoints extends ServiceEntryEndpoints {
  /** The `networking.istio.io/traffic-distribution` annotation, as Istio reads it. */
  readonly trafficDistribution?: IstioTrafficDistribution;
  readonly at: string;
}

export const TRAFFIC_DISTRIBUTION_ANNOTATION = 'networking.istio.io/traffic-distribution';
export type IstioTrafficDistribution = 'PreferSameZone' | 'PreferSameNode';

/**
 * Istio (pilot/pkg/model GetTrafficDistribution): the Service field first,
 * else the annotation, case-insensitive; PreferClose is PreferSameZone; an
 * unknown value means no preference (Istio logs a warning; the import notes it).
 */
export function istioTrafficDistribution(
  f: Findings,
  value: string | undefined,
  path: string,
): IstioTrafficDistribution | undefined {
  if (value === undefined) return undefined;
  const v = value.toLowerCase();
  if (v === 'preferclose' || v === 'prefersamezone') return 'PreferSameZone';
  if (v === 'prefersamenode') return 'PreferSameNode';
  if (v !== '')
    f.note(path, `unknown traffic distribution ${describe(value)}: no preference (as in Istio, which logs a warning)`);
  return undefined;
}

/**
 * What a traffic distribution means to an Istio sidecar when no
 * DestinationRule sets locality load balancing: failoverPriority on network,
 * region, zone (PreferSameZone) and also subzone and node (PreferSameNode),
 * forced on without outlierDetection.
 */
export function trafficDistributionSetting(td: IstioTrafficDistribution): Obj {
  const labels = ['network', 'region', 'zone', ...(td === 'PreferSameNode' ? ['subzone', 'node'] : [])];
  return { mode: 'random', routingPreference: ['region', 'zone', 'subzone'], policy: { failoverPriority: labels } };
}

export function importIstio(docs: readonly PolicyDocument[], f: Findings): Obj[] {
  const rules = new Map<string, { at: string; spec: Obj }>();
  const entries = new Map<string, Endpoints>();
  for (const d of docs) {
    const doc = d.value as Obj;
    const kind = doc['kind'];
    f.keys(doc, d.at, ['apiVersion', 'kind', 'metadata', 'spec'], {
      status: 'the status is written by Istio, not read',
    });
    const annotations = readMetadata(f, doc, d.at, kind === 'ServiceEntry' ? [TRAFFIC_DISTRIBUTION_ANNOTATION] : []);
    const spec = obj(f, doc['spec'], join(d.at, 'spec'));
    if (!spec) continue;
    if (kind === 'DestinationRule') {
      const host = str(f, spec['host'], join(d.at, 'spec.host'));
      if (host === undefined) continue;
      if (rules.has(host)) f.error(join(d.at, 'spec.host'), `a second DestinationRule for host "${host}"`);
      else rules.set(host, { at: d.at, spec });
    } else if (kind === 'ServiceEntry') {
      const se = readServiceEntry(f, spec, join(d.at, 'spec'));
      const td = istioTrafficDistribution(
        f,
        annotations[TRAFFIC_DISTRIBUTION_ANNOTATION],
        `${d.at}.metadata.annotations["${TRAFFIC_DISTRIBUTION_ANNOTATION}"]`,
      );
      for (const h of se.hosts)
        entries.set(h, { ...se.endpointsOf(h), at: d.at, ...(td ? { trafficDistribution: td } : {}) });
    } else {
      f.error(
        join(d.at, 'kind'),
        `must be DestinationRule or ServiceEntry, got ${describe(kind)} (${nameOf(doc) ?? 'unnamed'})`,
      );
    }
  }
  const out: Obj[] = [];
  for (const [host, se] of entries) {
    const rule = rules.get(host);
    const loadBalancing = rule
      ? readDestinationRule(f, rule.spec, join(rule.at, 'spec'), se.trafficDistribution)
      : se.trafficDistribution
        ? trafficDistributionSetting(se.trafficDistribution)
        : defaultSetting(f, host);
    out.push({
      name: host,
      ...(se.vip !== undefined ? { vip: se.vip } : {}),
      ...(se.port !== undefined ? { port: se.port } : {}),
      loadBalancing,
      endpoints: se.endpoints,
      ...(se.dns ? { dns: se.dns } : {}),
    });
  }
  for (const [host, rule] of rules) {
    if (!entries.has(host)) {
      // A rule without endpoints still becomes a service: endpoints can be added through the admin API.
      f.note(join(rule.at, 'spec.host'), `no ServiceEntry for "${host}": the service is imported without endpoints`);
      out.push({ name: host, loadBalancing: readDestinationRule(f, rule.spec, join(rule.at, 'spec')), endpoints: [] });
    }
  }
  return out;
}

/** No DestinationRule: Istio's mesh default (locality LB on) without outlier detection, so no priorities. */
function defaultSetting(f: Findings, host: string): Obj {
  f.note(host, 'no DestinationRule: without outlierDetection Istio gives every endpoint priority 0 (mode random)');
  return { mode: 'random', routingPreference: ['region', 'zone', 'subzone'] };
}

/** `td`: the service's traffic distribution, which applies when the rule sets no locality load balancing. */
export function readDestinationRule(f: Findings, spec: Obj, path: string, td?: IstioTrafficDistribution): Obj {
  f.keys(spec, path, ['host', 'trafficPolicy'], {
    subsets: 'subsets are not imported; the host is one service',
    exportTo: 'Canopy has no namespaces',
    workloadSelector: 'Canopy applies the rule to every client',
  });
  const tpPath = join(path, 'trafficPolicy');
  const tp = spec['trafficPolicy'] === undefined ? {} : (obj(f, spec['trafficPolicy'], tpPath) ?? {});
  f.keys(tp, tpPath, ['loadBalancer', 'outlierDetection'], {
    connectionPool: 'connection limits are not part of locality load balancing',
    tls: 'TLS is not part of locality load balancing',
    portLevelSettings: 'per-port policies are not imported',
    tunnel: 'tunnelling is not supported',
    proxyProtocol: 'PROXY protocol is not supported',
    retryBudget: 'retries are not part of locality load balancing',
  });
  const outlier = tp['outlierDetection'] !== undefined;
  if (outlier)
    f.note(
      join(tpPath, 'outlierDetection'),
      "read for its presence only (it turns Istio failover on); ejection itself is the client's",
    );
  const lbPath = join(tpPath, 'loadBalancer');
  const lbo = tp['loadBalancer'] === undefined ? {} : (obj(f, tp['loadBalancer'], lbPath) ?? {});
  f.keys(lbo, lbPath, ['localityLbSetting', 'zoneAwareLbSetting'], {
    simple: "the endpoint picking algorithm is the client's (gRPC: round_robin inside a locality)",
    consistentHash: 'hash-based load balancing is not supported',
    warmupDurationSecs: 'slow start is not supported',
    warmup: 'slow start is not supported',
  });
  const settingPath = join(lbPath, 'localityLbSetting');
  const tree = ['region', 'zone', 'subzone'];
  if (lbo['zoneAwareLbSetting'] !== undefined) {
    // Istio's GetEffectiveLbSetting: the zone-aware setting comes first.
    if (lbo['localityLbSetting'] !== undefined)
      f.note(settingPath, 'not imported: zoneAwareLbSetting takes precedence (as in Istio)');
    return readZoneAware(f, lbo['zoneAwareLbSetting'], join(lbPath, 'zoneAwareLbSetting'));
  }
  const random = { mode: 'random', routingPreference: tree };
  if (lbo['localityLbSetting'] === undefined) {
    if (td) return trafficDistributionSetting(td);
    if (outlier) return { mode: 'failover', routingPreference: tree };
    f.note(
      lbPath,
      'failover has no effect without outlierDetection in Istio: every endpoint is priority 0 (mode random)',
    );
    return random;
  }
  return readLocalityLbSetting(f, lbo['localityLbSetting'], settingPath, outlier);
}

/** Istio's localityLbSetting, read when the rule has one; `outlier`: the rule sets outlierDetection. */
function readLocalityLbSetting(f: Findings, raw: unknown, settingPath: string, outlier: boolean): Obj {
  const tree = ['region', 'zone', 'subzone'];
  const random = { mode: 'random', routingPreference: tree };
  const s = obj(f, raw, settingPath);
  if (!s) return random;
  f.keys(s, settingPath, ['enabled', 'distribute', 'failover', 'failoverPriority']);
  if (s['enabled'] === false) return random;
  if (s['enabled'] !== undefined && s['enabled'] !== true)
    f.error(join(settingPath, 'enabled'), `must be true or false, got ${describe(s['enabled'])}`);
  const distribute =
    s['distribute'] === undefined ? undefined : readDistribute(f, s['distribute'], join(settingPath, 'distribute'));
  let failover =
    s['failover'] === undefined ? undefined : readFailover(f, s['failover'], join(settingPath, 'failover'));
  let priority =
    s['failoverPriority'] === undefined
      ? undefined
      : readPriority(f, s['failoverPriority'], join(settingPath, 'failoverPriority'), failover !== undefined);
  if (distribute && failover)
    f.error(join(settingPath, 'failover'), 'cannot be set with distribute (Istio rejects the rule)');
  if ((failover || priority) && !outlier) {
    f.note(
      settingPath,
      'failover and failoverPriority have no effect without outlierDetection in Istio: imported as priority 0 for every endpoint; add outlierDetection to turn them on',
    );
    failover = undefined;
    priority = undefined;
  }
  const policy: Obj = {
    ...(failover ? { failover } : {}),
    ...(priority ? { failoverPriority: priority } : {}),
    ...(distribute ? { distribute } : {}),
  };
  // Ranking by region/zone/subzone: Istio's default with outlier detection, or with failover; not for
  // failoverPriority alone (only the listed labels count) nor for distribute (weights, no priorities).
  const ranked = outlier && !distribute && (failover !== undefined || priority === undefined);
  return {
    mode: ranked ? 'failover' : 'random',
    routingPreference: tree,
    ...(Object.keys(policy).length ? { policy } : {}),
  };
}

/**
 * Istio's zoneAwareLbSetting: endpoints are partitioned by region (the
 * client's own region first, then the `failover` target, then the rest),
 * under the optional failoverPriority labels; inside the region Envoy's
 * zone-aware routing spreads load by zone (policy.zoneAware: the sidecar's
 * cluster gets zone_aware_lb_config), which needs Envoy's local cluster
 * (self-discovery: resources/endpoint/local-cluster.ts). Every zone is its own
 * locality in priority 0. `enabled: false`: routing 0%, no tiers.
 */
function readZoneAware(f: Findings, v: unknown, path: string): Obj {
  const tree = ['region'];
  const s = obj(f, v, path);
  if (!s) return { mode: 'failover', routingPreference: tree };
  f.keys(s, path, ['enabled', 'failover', 'failoverPriority', 'minClusterSize']);
  if (s['enabled'] !== undefined && typeof s['enabled'] !== 'boolean')
    f.error(join(path, 'enabled'), `must be true or false, got ${describe(s['enabled'])}`);
  const size = s['minClusterSize'];
  if (size !== undefined && !(typeof size === 'number' && Number.isInteger(size) && size >= 0))
    f.error(join(path, 'minClusterSize'), `must be a non-negative integer, got ${describe(size)}`);
  const zoneAware = { enabled: s['enabled'] !== false, ...(typeof size === 'number' ? { minClusterSize: size } : {}) };
  if (s['enabled'] === false) {
    // Istio: the setting still wins, Envoy's own zone-aware routing is turned off (0%) and no tiers are made.
    f.note(
      path,
      'enabled: false: Envoy sidecars get zone-aware routing 0% and every endpoint at priority 0 (as in Istio)',
    );
    return { mode: 'random', routingPreference: ['region', 'zone', 'subzone'], policy: { zoneAware } };
  }
  f.note(
    path,
    `Envoy sidecars get zone-aware routing inside their region (zone_aware_lb_config, min_cluster_size ${typeof size === 'number' ? size : 6}), ` +
      "which needs Envoy's local cluster: a bootstrap cluster `local_cluster` (EDS) and node metadata canopy.local_service naming the client's own service; " +
      'proxyless gRPC has no zone-aware routing and weighs the zones of its region by endpoint count',
  );
  const failover = s['failover'] === undefined ? undefined : readFailover(f, s['failover'], join(path, 'failover'));
  const keys =
    s['failoverPriority'] === undefined ? undefined : strings(f, s['failoverPriority'], join(path, 'failoverPriority'));
  keys?.forEach((k, i) => {
    const key = k.includes('=') ? k.slice(0, k.indexOf('=')) : k;
    if (LOCALITY_LABELS.includes(key))
      f.error(
        join(join(path, 'failoverPriority'), i),
        `must not name ${key}: region, zone and subzone are handled by zone-aware routing (Istio rejects the rule)`,
      );
  });
  const priority = keys ? readPriority(f, keys, join(path, 'failoverPriority'), false) : undefined;
  const policy: Obj = {
    ...(failover ? { failover } : {}),
    ...(priority ? { failoverPriority: priority } : {}),
    zoneAware,
  };
  return { mode: 'failover', routingPreference: tree, policy };
}

function readDistribute(f: Findings, v: unknown, path: string): Obj[] | undefined {
  const rules = list(f, v, path);
  if (!rules) return undefined;
  const out: Obj[] = [];
  const froms: [string, string][] = [];
  rules.forEach((r, i) => {
    const p = join(path, i);
    const o = obj(f, r, p);
    if (!o) return;
    f.keys(o, p, ['from', 'to']);
    const from = str(f, o['from'], join(p, 'from'));
    const to = obj(f, o['to'], join(p, 'to'));
    if (from === undefined || !to) return;
    froms.push([from, join(p, 'from')]);
    let sum = 0;
    for (const [k, w] of Object.entries(to)) {
      if (typeof w !== 'number' || !Number.isInteger(w) || w < 1 || w > 100)
        f.error(join(join(p, 'to'), k), `must be an integer weight from 1 to 100, got ${describe(w)}`);
      else sum += w;
    }
    if (sum !== 100 && Object.values(to).every((w) => typeof w === 'number'))
      f.error(join(p, 'to'), `weights must sum to 100, got ${sum}`);
    checkLocalities(
      f,
      Object.keys(to).map((k) => [k, join(join(p, 'to'), k)]),
    );
    out.push({ from, to });
  });
  checkLocalities(f, froms);
  return out;
}

/**
 * Istio's validateLocalities: one `*` at most, and only at the end; no empty
 * region/zone/subzone; no pattern overlapping an earlier one ("r1/*" then
 * "r1/z1", or anything after "*").
 */
function checkLocalities(f: Findings, patterns: readonly (readonly [string, string])[]): void {
  const seen: string[][] = [];
  for (const [pattern, path] of patterns) {
    const stars = pattern.split('*').length - 1;
    if (stars > 1 || (stars === 1 && !pattern.endsWith('*'))) {
      f.error(path, `locality ${describe(pattern)}: at most one wildcard "*", and only at the end (Istio rejects it)`);
      continue;
    }
    const segs = pattern.split('/');
    if (segs.length > 3 || segs.some((x) => x === '')) {
      f.error(path, `locality ${describe(pattern)} must be region[/zone[/subzone]] with no empty part`);
      continue;
    }
    const key = segs[segs.length - 1] === '*' ? segs.slice(0, -1) : segs;
    // Two patterns overlap when one is a prefix of the other (a shorter pattern covers the longer).
    const clash = seen.find((s) => s.every((x, i) => key[i] === x) || key.every((x, i) => s[i] === x));
    if (clash) f.error(path, `locality ${describe(pattern)} overlaps "${clash.join('/') || '*'}" (Istio rejects it)`);
    else seen.push(key);
  }
}

function readFailover(f: Findings, v: unknown, path: string): Obj | undefined {
  const rules = list(f, v, path);
  if (!rules) return undefined;
  const seen = new Set<string>();
  const out: Obj[] = [];
  rules.forEach((r, i) => {
    const p = join(path, i);
    const o = obj(f, r, p);
    if (!o) return;
    f.keys(o, p, ['from', 'to']);
    const from = str(f, o['from'], join(p, 'from'));
    const to = str(f, o['to'], join(p, 'to'));
    if (from === undefined || to === undefined) return;
    for (const [k, x] of [
      ['from', from],
      ['to', to],
    ] as const) {
      if (x.includes('/') || x.includes('*'))
        f.error(join(p, k), `must be a region (no "/" or "*"), got ${describe(x)}`);
    }
    if (from === to) f.error(join(p, 'to'), `must differ from "from" (${from})`);
    if (seen.has(from)) {
      f.note(p, `unreachable: an earlier rule is already from "${from}" and Istio uses the first`);
      return;
    }
    seen.add(from);
    out.push({ from: [from], to: { type: 'only', values: [to] } });
  });
  return { rules: out, unmatched: 'last' };
}

function readPriority(f: Findings, v: unknown, path: string, withFailover: boolean): string[] | undefined {
  const keys = strings(f, v, path);
  if (!keys) return undefined;
  return keys.map((k, i) => {
    const eq = k.indexOf('=');
    const key = eq < 0 ? k : k.slice(0, eq);
    if (withFailover && LOCALITY_LABELS.includes(key)) {
      f.error(join(path, i), `cannot name ${key} together with failover (Istio rejects the rule)`);
    }
    const scope = ISTIO_SCOPES[key] ?? `label:${key}`;
    return eq < 0 ? scope : `${scope}=${k.slice(eq + 1)}`;
  });
}
