/**
 * Kuma → Canopy: a MeshLoadBalancingStrategy's `localityAwareness` for the
 * services its `to[].targetRef` names, with the endpoints of the Dataplanes
 * whose inbound `kuma.io/service` tag is that service (Kubernetes or
 * universal form). The Kuma zone (`kuma.io/zone`) is Canopy's `zone`; every
 * inbound tag is an endpoint label, so `affinityTags` keys are `label:<tag>`.
 *
 * Kept from Kuma: local zone first; crossZone rules in order, zones no rule
 * accepts dropped (and localZone alone means local only); affinity weights
 * 900/90/9 by default; overprovisioning factor uint32(100/threshold)·100,
 * 200 by default. Changed: priorities have no gap and every locality has a
 * weight (gRPC), see docs/locality-and-policies.md ("Where Canopy deliberately differs").
 */
import {
  describe,
  Findings,
  isObject,
  join,
  labelsOf,
  list,
  obj,
  readMetadata,
  str,
  strings,
  type Obj,
  type PolicyDocument,
} from './documents.js';

const TARGET_TYPES: Readonly<Record<string, string>> = {
  Any: 'any',
  Only: 'only',
  AnyExcept: 'anyExcept',
  None: 'none',
};

const DISPLAY_NAME = 'kuma.io/display-name';

export function isKuma(doc: Obj): boolean {
  const api = doc['apiVersion'];
  return (
    (typeof api === 'string' && api.startsWith('kuma.io/')) ||
    doc['type'] === 'MeshLoadBalancingStrategy' ||
    doc['type'] === 'Dataplane'
  );
}

export function importKuma(docs: readonly PolicyDocument[], f: Findings): Obj[] {
  const endpoints = new Map<string, Obj[]>();
  const policies = new Map<string, Obj>();
  const order: string[] = [];
  for (const d of docs) {
    const doc = d.value as Obj;
    const kind = doc['kind'] ?? doc['type'];
    if (doc['type'] !== undefined) {
      // Universal form: the resource's own fields sit beside type, name and mesh.
      f.keys(doc, d.at, ['type', 'name', 'mesh', 'labels', kind === 'Dataplane' ? 'networking' : 'spec'], {
        creationTime: 'set by Kuma, not read',
        modificationTime: 'set by Kuma, not read',
      });
    } else {
      f.keys(doc, d.at, ['apiVersion', 'kind', 'metadata', 'spec', 'mesh'], {
        status: 'the status is not read',
      });
      readMetadata(f, doc, d.at);
    }
    if (kind === 'Dataplane') readDataplane(f, doc, d.at, endpoints);
    else if (kind === 'MeshLoadBalancingStrategy') readStrategy(f, doc, d.at, policies);
    else
      f.error(
        join(d.at, doc['kind'] !== undefined ? 'kind' : 'type'),
        `must be MeshLoadBalancingStrategy or Dataplane, got ${describe(kind)}`,
      );
  }
  for (const name of [...endpoints.keys(), ...policies.keys()]) if (!order.includes(name)) order.push(name);
  const mesh = policies.get('*');
  return order
    .filter((n) => n !== '*')
    .map((name) => ({
      name,
      loadBalancing: policies.get(name) ?? mesh ?? { mode: 'failover', routingPreference: ['zone'] },
      endpoints: endpoints.get(name) ?? [],
    }));
}

function readDataplane(f: Findings, doc: Obj, at: string, out: Map<string, Obj[]>): void {
  const universal = doc['type'] === 'Dataplane';
  const base = universal ? doc : (obj(f, doc['spec'], join(at, 'spec')) ?? {});
  const path = universal ? at : join(at, 'spec');
  const net = obj(f, base['networking'], join(path, 'networking'));
  if (!net) return;
  const np = join(path, 'networking');
  f.keys(net, np, ['address', 'inbound'], {
    advertisedAddress: 'Canopy sends the inbound address',
    outbound: 'outbounds are the client side',
    gateway: 'gateways are not imported',
    admin: 'the admin port is not a service endpoint',
    transparentProxying: 'interception is not part of locality load balancing',
  });
  const address = net['address'] === undefined ? undefined : str(f, net['address'], join(np, 'address'));
  (list(f, net['inbound'] ?? [], join(np, 'inbound')) ?? []).forEach((raw, i) => {
    const p = join(join(np, 'inbound'), i);
    const inbound = obj(f, raw, p);
    if (!inbound) return;
    f.keys(inbound, p, ['port', 'address', 'tags', 'health'], {
      servicePort: 'Canopy sends the inbound port',
      serviceAddress: 'Canopy sends the inbound address',
      name: 'inbound names are not used',
      state: 'use health.ready',
    });
    const tags = labelsOf(f, inbound['tags'], join(p, 'tags'));
    const service = tags['kuma.io/service'];
    if (!service) return void f.error(join(p, 'tags'), 'needs a kuma.io/service tag');
    const addr = inbound['address'] === undefined ? address : str(f, inbound['address'], join(p, 'address'));
    if (addr === undefined) return void f.error(join(np, 'address'), 'needs an address');
    const health = inbound['health'] === undefined ? {} : (obj(f, inbound['health'], join(p, 'health')) ?? {});
    f.keys(health, join(p, 'health'), ['ready']);
    const ready = health['ready'];
    if (ready !== undefined && typeof ready !== 'boolean')
      f.error(join(p, 'health.ready'), `must be true or false, got ${describe(ready)}`);
    const list = out.get(service) ?? [];
    out.set(service, list);
    list.push({
      address: addr,
      port: inbound['port'],
      locality: { region: '', zone: tags['kuma.io/zone'] ?? '', subzone: '' },
      labels: tags,
      ...(ready === false ? { health: 'unhealthy' } : {}),
    });
  });
}

function readStrategy(f: Findings, doc: Obj, at: string, out: Map<string, Obj>): void {
  for (const e of strategyEntries(f, doc, at)) {
    let name: string | undefined;
    if (e.ref['kind'] === 'Mesh') name = '*';
    else {
      name = serviceOf(f, e.ref, join(e.path, 'targetRef'));
      for (const k of Object.keys(e.ref))
        if (!['kind', 'name', 'labels'].includes(k))
          f.note(join(join(e.path, 'targetRef'), k), 'not imported: services are matched by name');
    }
    if (name === undefined) continue;
    if (out.has(name)) f.note(e.path, `a later entry for "${name === '*' ? 'Mesh' : name}" replaces the earlier one`);
    out.set(name, e.loadBalancing);
  }
}

/** One `spec.to[]` entry of a MeshLoadBalancingStrategy: what it targets and the loadBalancing it gives. */
export interface StrategyEntry {
  /** `spec.to[i]`, for messages. */
  readonly path: string;
  /** Its targetRef, kind Mesh, MeshService or MeshMultiZoneService. */
  readonly ref: Obj;
  readonly loadBalancing: Obj;
}

/**
 * The `to[]` entries of a MeshLoadBalancingStrategy, each read into Canopy's
 * loadBalancing; what a targetRef names is the caller's (a document names
 * services by `kuma.io/service`, a live object by the Kubernetes Service).
 */
export function strategyEntries(f: Findings, doc: Obj, at: string): StrategyEntry[] {
  const spec = obj(f, doc['spec'], join(at, 'spec'));
  if (!spec) return [];
  const sp = join(at, 'spec');
  f.keys(spec, sp, ['to', 'targetRef']);
  const top = spec['targetRef'];
  if (isObject(top) && top['kind'] !== 'Mesh') {
    f.note(
      join(sp, 'targetRef'),
      `applies to every client: Canopy does not select clients by ${describe(top['kind'])}`,
    );
  }
  const out: StrategyEntry[] = [];
  (list(f, spec['to'], join(sp, 'to')) ?? []).forEach((raw, i) => {
    const p = join(join(sp, 'to'), i);
    const to = obj(f, raw, p);
    if (!to) return;
    f.keys(to, p, ['targetRef', 'default']);
    const ref = obj(f, to['targetRef'], join(p, 'targetRef'));
    if (!ref) return;
    const kind = ref['kind'];
    if (kind !== 'Mesh' && kind !== 'MeshService' && kind !== 'MeshMultiZoneService')
      return void f.error(
        join(p, 'targetRef.kind'),
        `must be Mesh, MeshService or MeshMultiZoneService, got ${describe(kind)}`,
      );
    const def = obj(f, to['default'] ?? {}, join(p, 'default'));
    if (!def) return;
    out.push({ path: p, ref, loadBalancing: readDefault(f, def, join(p, 'default')) });
  });
  return out;
}

/**
 * The service a MeshService/MeshMultiZoneService targetRef names: `name`, or
 * (Kuma's current form) `labels` with `kuma.io/display-name`, the name the
 * service's Dataplanes carry as `kuma.io/service`. Other labels select among
 * MeshService resources, which Canopy does not hold: noted.
 */
function serviceOf(f: Findings, ref: Obj, path: string): string | undefined {
  if (ref['labels'] === undefined) return str(f, ref['name'], join(path, 'name'));
  const labels = labelsOf(f, ref['labels'], join(path, 'labels'));
  if (ref['name'] !== undefined) return void f.error(join(path, 'labels'), 'give name or labels, not both');
  const name = labels[DISPLAY_NAME];
  if (!name)
    return void f.error(
      join(path, 'labels'),
      `needs ${DISPLAY_NAME}: Canopy matches services by the name their Dataplanes carry as kuma.io/service`,
    );
  for (const k of Object.keys(labels))
    if (k !== DISPLAY_NAME)
      f.note(
        `${join(path, 'labels')}["${k}"]`,
        `not used: the service is selected by ${DISPLAY_NAME} "${name}" alone (Canopy holds no MeshService resources)`,
      );
  return name;
}

/** localZone: its affinity tags, as the policy's affinity (empty when none is usable). */
function readLocalZone(f: Findings, local: Obj, lp: string): Obj[] {
  f.keys(local, join(lp, 'localZone'), ['affinityTags']);
  const tp0 = join(lp, 'localZone.affinityTags');
  const tags = list(f, local['affinityTags'] ?? [], tp0) ?? [];
  const affinity: Obj[] = [];
  tags.forEach((t, i) => {
    const tp = join(tp0, i);
    const o = obj(f, t, tp);
    if (!o) return;
    f.keys(o, tp, ['key', 'weight']);
    const key = str(f, o['key'], join(tp, 'key'));
    if (key === '') f.error(join(tp, 'key'), 'must not be empty');
    if (key) affinity.push({ scope: `label:${key}`, ...(o['weight'] !== undefined ? { weight: o['weight'] } : {}) });
  });
  // Kuma: either every tag has a weight or none has (the defaults 900/90/9 are for the unweighted form).
  const weighted = tags.filter((t) => isObject(t) && t['weight'] !== undefined).length;
  if (weighted > 0 && weighted < tags.length)
    f.error(tp0, `all or none of the affinity tags must have a weight (${weighted} of ${tags.length} have one)`);
  if (affinity.length)
    f.note(
      join(lp, 'localZone.affinityTags'),
      "the client's values are its xDS node labels (node metadata `labels`); Kuma reads the client Dataplane's labels (and, before 2.10, its inbound tags): give those as node labels",
    );
  return affinity;
}

function readDefault(f: Findings, def: Obj, path: string): Obj {
  f.keys(def, path, ['localityAwareness'], {
    loadBalancer: "the endpoint picking algorithm is the client's",
    hashPolicies: 'hash-based load balancing is not supported',
  });
  const tree = ['zone'];
  const la =
    def['localityAwareness'] === undefined
      ? {}
      : (obj(f, def['localityAwareness'], join(path, 'localityAwareness')) ?? {});
  const lp = join(path, 'localityAwareness');
  f.keys(la, lp, ['disabled', 'localZone', 'crossZone']);
  const local = la['localZone'] === undefined ? undefined : obj(f, la['localZone'], join(lp, 'localZone'));
  const cross = la['crossZone'] === undefined ? undefined : obj(f, la['crossZone'], join(lp, 'crossZone'));
  if (!local && !cross)
    return la['disabled'] === true
      ? { mode: 'random', routingPreference: tree }
      : { mode: 'failover', routingPreference: tree };
  if (la['disabled'] === true)
    f.note(join(lp, 'disabled'), 'ignored: localZone/crossZone take precedence (as in Kuma)');
  const policy: Obj = {};
  if (local) {
    const affinity = readLocalZone(f, local, lp);
    if (affinity.length) policy['affinity'] = affinity;
  }
  let factor = 200;
  const rules: Obj[] = [];
  if (cross) {
    const cp = join(lp, 'crossZone');
    f.keys(cross, cp, ['failover', 'failoverThreshold']);
    (list(f, cross['failover'] ?? [], join(cp, 'failover')) ?? []).forEach((r, i) => {
      const rp = join(join(cp, 'failover'), i);
      const o = obj(f, r, rp);
      if (!o) return;
      f.keys(o, rp, ['from', 'to']);
      const from = o['from'] === undefined ? undefined : obj(f, o['from'], join(rp, 'from'));
      if (from) f.keys(from, join(rp, 'from'), ['zones']);
      const zones = from ? strings(f, from['zones'], join(rp, 'from.zones')) : undefined;
      if (zones?.length === 0) f.error(join(rp, 'from.zones'), 'must not be empty');
      const to = obj(f, o['to'], join(rp, 'to'));
      if (!to) return;
      f.keys(to, join(rp, 'to'), ['type', 'zones']);
      const type = TARGET_TYPES[String(to['type'])];
      if (!type)
        return void f.error(join(rp, 'to.type'), `must be Any, Only, AnyExcept or None, got ${describe(to['type'])}`);
      const values = to['zones'] === undefined ? [] : (strings(f, to['zones'], join(rp, 'to.zones')) ?? []);
      // Kuma's validator: zones are required for Only/AnyExcept and forbidden for Any/None.
      if ((type === 'only' || type === 'anyExcept') && values.length === 0)
        return void f.error(join(rp, 'to.zones'), `must not be empty when type is ${String(to['type'])}`);
      if ((type === 'any' || type === 'none') && values.length > 0)
        return void f.error(join(rp, 'to.zones'), `must be empty when type is ${String(to['type'])}`);
      rules.push({ ...(zones ? { from: zones } : {}), to: { type, ...(values.length ? { values } : {}) } });
    });
    const threshold = cross['failoverThreshold'];
    if (threshold !== undefined) {
      const tp = join(cp, 'failoverThreshold');
      const o = obj(f, threshold, tp);
      if (o) f.keys(o, tp, ['percentage']);
      const raw = o?.['percentage'];
      // Kuma's IntOrString: 70 or "70" (or "70.5").
      const pct = typeof raw === 'number' || (typeof raw === 'string' && raw.trim() !== '') ? Number(raw) : NaN;
      if (!(pct > 0 && pct <= 100))
        f.error(join(tp, 'percentage'), `must be a percentage in (0, 100], got ${describe(o?.['percentage'])}`);
      else factor = Math.floor(100 / pct) * 100;
    }
  }
  // Kuma: zones no rule accepts get no endpoints, so localZone without crossZone is local-only.
  policy['failover'] = { rules, unmatched: 'drop' };
  return { mode: 'failover', routingPreference: tree, overprovisioningFactor: factor, policy };
}
