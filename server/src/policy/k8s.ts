/**
 * Kubernetes → Canopy: a Service's `trafficDistribution` (and
 * `internalTrafficPolicy: Local`) with its EndpointSlices (label
 * `kubernetes.io/service-name`): each address with its `zone`, `nodeName`
 * and readiness. PreferSameZone (and the deprecated PreferClose) becomes
 * tiers [zone], PreferSameNode [zone, node]; the Service's clusterIP is the
 * VIP. kube-proxy's rule that a mode applies only when every ready endpoint
 * is hinted is evaluated on the live endpoints (domain/policy-cla.ts).
 */
import {
  describe,
  Findings,
  isObject,
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
import { isIp } from '../domain/ip.js';
import { forZonesLabel } from '../domain/zone-hints.js';
import { istioTrafficDistribution, TRAFFIC_DISTRIBUTION_ANNOTATION } from './istio.js';

const SERVICE_IGNORED: Readonly<Record<string, string>> = {
  selector: 'Canopy takes endpoints from the EndpointSlices',
  type: 'only the cluster-internal VIP is imported',
  ipFamilies: 'address families follow the endpoints',
  ipFamilyPolicy: 'address families follow the endpoints',
  sessionAffinity: 'session affinity is not supported',
  sessionAffinityConfig: 'session affinity is not supported',
  externalTrafficPolicy: 'external traffic is not served by Canopy',
  externalIPs: 'external traffic is not served by Canopy',
  externalName: 'ExternalName services have no endpoints',
  loadBalancerIP: 'external traffic is not served by Canopy',
  loadBalancerSourceRanges: 'external traffic is not served by Canopy',
  loadBalancerClass: 'external traffic is not served by Canopy',
  allocateLoadBalancerNodePorts: 'external traffic is not served by Canopy',
  healthCheckNodePort: 'external traffic is not served by Canopy',
  publishNotReadyAddresses: 'only ready endpoints receive traffic',
};

export function isKubernetes(doc: Obj): boolean {
  return (doc['apiVersion'] === 'v1' && doc['kind'] === 'Service') || doc['kind'] === 'EndpointSlice';
}

interface Slice {
  readonly at: string;
  readonly port?: number;
  readonly endpoints: Obj[];
}

export function importKubernetes(docs: readonly PolicyDocument[], f: Findings): Obj[] {
  const services: { at: string; name: string; spec: Obj }[] = [];
  const slices = new Map<string, Slice[]>();
  for (const d of docs) {
    const doc = d.value as Obj;
    if (doc['kind'] === 'Service') {
      f.keys(doc, d.at, ['apiVersion', 'kind', 'metadata', 'spec'], { status: 'the status is not read' });
      const annotations = readMetadata(f, doc, d.at, [TRAFFIC_DISTRIBUTION_ANNOTATION]);
      const name = nameOf(doc);
      if (name === undefined) {
        f.error(join(d.at, 'metadata.name'), 'is required');
        continue;
      }
      const spec = obj(f, doc['spec'] ?? {}, join(d.at, 'spec'));
      const annotation = annotations[TRAFFIC_DISTRIBUTION_ANNOTATION];
      if (spec && annotation !== undefined && spec['trafficDistribution'] === undefined) {
        // Istio reads the field first, then this annotation; kube-proxy reads only the field.
        const ap = `${d.at}.metadata.annotations["${TRAFFIC_DISTRIBUTION_ANNOTATION}"]`;
        const td = istioTrafficDistribution(f, annotation, ap);
        if (td) {
          f.note(
            ap,
            `Istio's annotation: imported as trafficDistribution ${td} with Kubernetes' tiers; import the endpoints as an Istio ServiceEntry for Istio's exact order (network, region, zone${td === 'PreferSameNode' ? ', subzone, node' : ''})`,
          );
          services.push({ at: d.at, name, spec: { ...spec, trafficDistribution: td } });
          continue;
        }
      } else if (annotation !== undefined) {
        f.note(
          `${d.at}.metadata.annotations["${TRAFFIC_DISTRIBUTION_ANNOTATION}"]`,
          'not imported: spec.trafficDistribution is set and takes precedence (as in Istio)',
        );
      }
      if (spec) services.push({ at: d.at, name, spec });
    } else if (doc['kind'] === 'EndpointSlice') {
      f.keys(doc, d.at, ['apiVersion', 'kind', 'metadata', 'addressType', 'endpoints', 'ports']);
      readMetadata(f, doc, d.at);
      const md = isObject(doc['metadata']) ? doc['metadata'] : {};
      const owner = isObject(md['labels']) ? md['labels']['kubernetes.io/service-name'] : undefined;
      if (typeof owner !== 'string') {
        f.error(join(d.at, 'metadata.labels'), 'needs kubernetes.io/service-name (the Service the slice belongs to)');
        continue;
      }
      const s = readSlice(f, doc, d.at);
      slices.set(owner, [...(slices.get(owner) ?? []), s]);
    } else {
      f.error(join(d.at, 'kind'), `must be Service or EndpointSlice, got ${describe(doc['kind'])}`);
    }
  }
  const out: Obj[] = [];
  for (const s of services) {
    const own = slices.get(s.name) ?? [];
    if (own.length === 0) f.note(s.at, `no EndpointSlice for "${s.name}": imported without endpoints`);
    out.push(readService(f, s.spec, join(s.at, 'spec'), s.name, own));
  }
  for (const [owner, list] of slices) {
    if (!services.some((s) => s.name === owner))
      f.error(join(list[0]!.at, 'metadata.labels'), `no Service "${owner}" among the documents`);
  }
  return out;
}

function readService(f: Findings, spec: Obj, path: string, name: string, slices: readonly Slice[]): Obj {
  f.keys(
    spec,
    path,
    ['ports', 'clusterIP', 'clusterIPs', 'trafficDistribution', 'internalTrafficPolicy'],
    SERVICE_IGNORED,
  );
  const ports = spec['ports'] === undefined ? [] : (list(f, spec['ports'], join(path, 'ports')) ?? []);
  const first = ports[0];
  const port = isObject(first) && typeof first['port'] === 'number' ? first['port'] : undefined;
  if (ports.length > 1) f.note(join(path, 'ports'), `only the first port (${port}) is imported`);
  const ip = spec['clusterIP'];
  const vip = typeof ip === 'string' && ip !== 'None' && ip !== '' ? ip : undefined;
  // A dual-stack Service's cluster IPs (the primary first): both are the service's VIPs.
  const ips = spec['clusterIPs'] === undefined ? undefined : strings(f, spec['clusterIPs'], join(path, 'clusterIPs'));
  const vips = vip !== undefined && ips !== undefined && ips.length > 1 ? ips : undefined;
  const td = spec['trafficDistribution'];
  const itp = spec['internalTrafficPolicy'];
  if (itp === 'Local' && td !== undefined)
    f.note(join(path, 'trafficDistribution'), 'internalTrafficPolicy Local takes precedence (as in kube-proxy)');
  else if (td === 'PreferClose')
    f.note(join(path, 'trafficDistribution'), 'PreferClose is the deprecated name of PreferSameZone');
  const lb = kubeLoadBalancing(td, itp);
  if ('error' in lb) f.error(join(path, lb.field), lb.error);
  const loadBalancing = 'error' in lb ? { mode: 'random', routingPreference: ['zone'] } : lb.loadBalancing;
  return {
    name,
    ...(vips !== undefined ? { vips } : vip !== undefined ? { vip } : {}),
    ...(port !== undefined ? { port } : {}),
    loadBalancing,
    endpoints: slices.flatMap((s) => s.endpoints),
  };
}

/**
 * A Service's trafficDistribution and internalTrafficPolicy as Canopy's
 * loadBalancing (the document importer and the live source both use it).
 */
export function kubeLoadBalancing(
  td: unknown,
  itp: unknown,
): { loadBalancing: Obj } | { error: string; field: 'trafficDistribution' | 'internalTrafficPolicy' } {
  if (itp !== undefined && itp !== 'Local' && itp !== 'Cluster')
    return { field: 'internalTrafficPolicy', error: `must be Cluster or Local, got ${describe(itp)}` };
  if (itp === 'Local') return { loadBalancing: { mode: 'strict', routingPreference: ['node'] } };
  if (td === undefined) return { loadBalancing: { mode: 'random', routingPreference: ['zone'] } };
  if (td === 'PreferSameZone' || td === 'PreferClose')
    return {
      loadBalancing: {
        mode: 'failover',
        routingPreference: ['zone'],
        policy: { trafficDistribution: 'PreferSameZone' },
      },
    };
  if (td === 'PreferSameNode')
    return {
      loadBalancing: {
        mode: 'failover',
        routingPreference: ['zone', 'node'],
        policy: { trafficDistribution: 'PreferSameNode' },
      },
    };
  return {
    field: 'trafficDistribution',
    error: `must be PreferSameZone, PreferClose or PreferSameNode, got ${describe(td)}`,
  };
}

function readSlice(f: Findings, doc: Obj, at: string): Slice {
  // kube-proxy serves IPv4 and IPv6 slices only; an FQDN slice (deprecated) reaches no client.
  const addressType = doc['addressType'] === undefined ? 'IPv4' : str(f, doc['addressType'], join(at, 'addressType'));
  if (addressType === 'FQDN') {
    f.note(
      join(at, 'addressType'),
      'FQDN slices are not imported: kube-proxy ignores them (deprecated); for hostname endpoints use an Istio ServiceEntry with resolution DNS',
    );
    return { at, endpoints: [] };
  }
  if (addressType !== undefined && addressType !== 'IPv4' && addressType !== 'IPv6')
    f.error(join(at, 'addressType'), `must be IPv4, IPv6 or FQDN, got ${describe(addressType)}`);
  const ports = doc['ports'] === undefined ? [] : (list(f, doc['ports'], join(at, 'ports')) ?? []);
  const first = ports[0];
  const port = isObject(first) && typeof first['port'] === 'number' ? first['port'] : undefined;
  if (ports.length > 1) f.note(join(at, 'ports'), `only the first port (${port}) is imported`);
  const endpoints: Obj[] = [];
  (list(f, doc['endpoints'] ?? [], join(at, 'endpoints')) ?? []).forEach((raw, i) => {
    const p = join(join(at, 'endpoints'), i);
    const e = obj(f, raw, p);
    if (!e) return;
    f.keys(e, p, ['addresses', 'conditions', 'nodeName', 'zone', 'hints'], {
      targetRef: 'the endpoint is identified by its address',
      hostname: 'the endpoint is identified by its address',
      deprecatedTopology: 'use zone and nodeName',
    });
    const zone = e['zone'] === undefined ? '' : (str(f, e['zone'], join(p, 'zone')) ?? '');
    const node = e['nodeName'] === undefined ? '' : (str(f, e['nodeName'], join(p, 'nodeName')) ?? '');
    const labels = readHints(f, e['hints'], join(p, 'hints'), zone, node);
    const c = e['conditions'] === undefined ? {} : (obj(f, e['conditions'], join(p, 'conditions')) ?? {});
    f.keys(c, join(p, 'conditions'), ['ready', 'serving', 'terminating']);
    // kube-proxy: ready (nil = ready) serves; serving and terminating serves only while no endpoint of the
    // service is ready (health terminating); anything else gets no traffic.
    const health =
      c['ready'] !== false
        ? 'healthy'
        : c['serving'] === true && c['terminating'] === true
          ? 'terminating'
          : 'unhealthy';
    for (const [j, address] of (strings(f, e['addresses'], join(p, 'addresses')) ?? []).entries()) {
      if (port === undefined) {
        f.error(join(at, 'ports'), 'needs a port');
        break;
      }
      if (!isIp(address) || address.includes(':') !== (addressType === 'IPv6')) {
        f.error(
          join(join(p, 'addresses'), j),
          `must be an ${addressType} address (the slice's addressType), got ${describe(address)}`,
        );
        continue;
      }
      endpoints.push({
        address,
        port,
        locality: { region: '', zone, subzone: '' },
        ...(node ? { node } : {}),
        ...(Object.keys(labels).length ? { labels } : {}),
        health,
      });
    }
  });
  return { at, ...(port !== undefined ? { port } : {}), endpoints };
}

/**
 * `forZones` hints are carried as the endpoint's hinted zones (domain/zone-hints.ts: followed under
 * trafficDistribution, as kube-proxy does); `forNodes` naming this endpoint's own node is what Canopy does
 * anyway, other nodes are reported.
 */
function readHints(f: Findings, v: unknown, path: string, zone: string, node: string): Record<string, string> {
  if (v === undefined) return {};
  const h = obj(f, v, path);
  if (!h) return {};
  f.keys(h, path, ['forZones', 'forNodes']);
  const names = (key: string) =>
    h[key] === undefined
      ? undefined
      : (list(f, h[key], join(path, key)) ?? []).map((x) =>
          isObject(x) && typeof x['name'] === 'string' ? x['name'] : '',
        );
  const zones = names('forZones');
  if (names('forNodes')?.some((n) => n !== node))
    f.note(
      join(path, 'forNodes'),
      `hints for other nodes are not imported: Canopy places the endpoint at its own node "${node}"`,
    );
  return (zones && forZonesLabel(zones, zone)) ?? {};
}
