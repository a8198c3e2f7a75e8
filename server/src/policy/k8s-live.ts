/**
 * Live Kubernetes objects → Canopy services: what `canopy serve --kubeconfig`
 * writes for each Service from its EndpointSlices and the Nodes they run on.
 * Pure: the watches and the writes are kube/kube-source.ts.
 *
 * Naming: a Service's first port is the Canopy service `NAME.NAMESPACE`; each
 * further port is `NAME.NAMESPACE_PORT` (`_` appears in no Kubernetes name,
 * so no two Services can collide). A gRPC client dials `xds:///NAME.NAMESPACE`;
 * an Envoy sidecar gets the cluster and outbound listener of that name.
 */
import { load } from 'js-yaml';
import type { FieldError } from '../domain/errors.js';
import type { Locality } from '../domain/locality.js';
import { NO_LABELS } from '../domain/locality.js';
import { canonicalIp, isIp } from '../domain/ip.js';
import { endpointKey, type Endpoint, type Health, type ServiceSpec } from '../domain/service.js';
import { parseServiceSpec } from '../domain/spec.js';
import { forZonesLabel } from '../domain/zone-hints.js';
import { Findings, isObject, type Obj } from './documents.js';
import { readDestinationRule, type IstioTrafficDistribution } from './istio.js';
import { kubeLoadBalancing } from './k8s.js';

/** The annotation whose value (YAML or JSON) is the service's `loadBalancing`, as in the config file. */
export const LOAD_BALANCING_ANNOTATION = 'canopy.dev/load-balancing';
export const REGION_LABEL = 'topology.kubernetes.io/region';
export const ZONE_LABEL = 'topology.kubernetes.io/zone';
export const DEFAULT_SUBZONE_LABEL = 'topology.istio.io/subzone';
export const NETWORK_LABEL = 'topology.istio.io/network';
/** Istio's cluster ID label: read only where Canopy names no cluster (see endpointsOf). */
export const CLUSTER_LABEL = 'topology.istio.io/cluster';

/** The fields of the Kubernetes objects read here (a subset of client-node's V1Service etc.). */
export interface KubeMeta {
  readonly name?: string;
  readonly namespace?: string;
  readonly labels?: Readonly<Record<string, string>>;
  readonly annotations?: Readonly<Record<string, string>>;
}
export interface KubeServicePort {
  readonly name?: string;
  readonly port: number;
  readonly appProtocol?: string;
}
export interface KubeService {
  readonly metadata?: KubeMeta;
  readonly spec?: {
    readonly type?: string;
    readonly clusterIP?: string;
    readonly clusterIPs?: readonly string[];
    readonly ports?: readonly KubeServicePort[];
    readonly trafficDistribution?: string;
    readonly internalTrafficPolicy?: string;
  };
}
export interface KubeSliceEndpoint {
  readonly addresses: readonly string[];
  readonly conditions?: { readonly ready?: boolean; readonly serving?: boolean; readonly terminating?: boolean };
  readonly nodeName?: string;
  readonly zone?: string;
  readonly hints?: { readonly forZones?: readonly { name: string }[] };
}
export interface KubeSlice {
  readonly metadata?: KubeMeta;
  readonly addressType: string;
  readonly endpoints?: readonly KubeSliceEndpoint[];
  readonly ports?: readonly { readonly name?: string; readonly port?: number }[];
}

/** What an endpoint takes from its node. */
export interface NodePlace {
  readonly region: string;
  readonly zone: string;
  readonly subzone: string;
}

export function nodePlace(labels: Readonly<Record<string, string>> | undefined, subzoneLabel: string): NodePlace {
  return {
    region: labels?.[REGION_LABEL] ?? '',
    zone: labels?.[ZONE_LABEL] ?? '',
    subzone: labels?.[subzoneLabel] ?? '',
  };
}

export interface MappedServices {
  readonly specs: readonly ServiceSpec[];
  readonly errors: readonly FieldError[];
  /** Endpoints whose hints name zones other than (or beside) their own: followed under trafficDistribution. */
  readonly foreignHints: number;
  /** Per Canopy service, where each endpoint (by endpointKey) came from: for naming a refused one. */
  readonly origins?: ReadonlyMap<string, ReadonlyMap<string, EndpointOrigin>>;
}

/** An endpoint's place in its EndpointSlice. */
export interface EndpointOrigin {
  /** `namespace/name` of the slice. */
  readonly slice: string;
  /** Its index in the slice's `endpoints`, and the index in `ports` of the port it took. */
  readonly endpoint: number;
  readonly port: number;
}

export interface MapContext {
  readonly node: (name: string) => NodePlace | undefined;
  readonly locality: (l: Locality) => Locality;
  /** The Istio DestinationRule for a Service (by `serviceKey`), when Istio's CRDs are installed. */
  readonly destinationRule?: (key: string) => LiveDestinationRule | undefined;
  /** The Kuma MeshLoadBalancingStrategy entry for a Service, when Kuma's CRDs are installed. */
  readonly meshStrategy?: (key: string) => LiveMeshStrategy | undefined;
  /** The cluster the objects come from (its `cluster` scope), and its network unless a slice names one. */
  readonly cluster?: { readonly name: string; readonly network: string };
}

export interface LiveMeshStrategy {
  /** e.g. `MeshLoadBalancingStrategy kuma-system/web-lb`. */
  readonly at: string;
  readonly loadBalancing: Obj;
  /** The policy's errors (policy/kuma-live.ts): the Service is refused while they stand. */
  readonly errors: readonly FieldError[];
}

export interface LiveDestinationRule {
  /** e.g. `DestinationRule shop/web-rule`. */
  readonly at: string;
  readonly spec: Obj;
}

/**
 * The Service (as `serviceKey`) a DestinationRule's host names: `web` (in the
 * rule's namespace), `web.shop`, `web.shop.svc` or `web.shop.svc.<domain>`.
 * Wildcards and other hosts name none.
 */
export function destinationRuleTarget(host: string, ruleNamespace: string): string | undefined {
  if (host.includes('*')) return undefined;
  const parts = host.split('.');
  if (parts.length === 1) return serviceKey(ruleNamespace, host);
  if (parts.length === 2 || parts[2] === 'svc') return serviceKey(parts[1]!, parts[0]!);
  return undefined;
}

export function serviceKey(namespace: string, name: string): string {
  return `${name}.${namespace}`;
}

/** The Canopy services of one Kubernetes Service, one per port. ExternalName and headless Services have none. */
export function mapService(svc: KubeService, slices: Iterable<KubeSlice>, ctx: MapContext): MappedServices {
  const name = svc.metadata?.name ?? '';
  const namespace = svc.metadata?.namespace ?? '';
  const spec = svc.spec ?? {};
  const base = serviceKey(namespace, name);
  const at = `Service ${namespace}/${name}`;
  if (spec.type === 'ExternalName' || !spec.ports?.length) return { specs: [], errors: [], foreignHints: 0 };
  const lb = loadBalancingOf(svc, at, ctx.destinationRule?.(base), ctx.meshStrategy?.(base));
  if ('errors' in lb) return { specs: [], errors: lb.errors, foreignHints: 0 };
  // A dual-stack Service's clusterIPs: one per family, the primary (clusterIP) first.
  const vips = (spec.clusterIPs ?? (spec.clusterIP ? [spec.clusterIP] : [])).filter((ip) => ip !== 'None' && isIp(ip));
  const sliceList = [...slices];
  const specs: ServiceSpec[] = [];
  const errors: FieldError[] = [];
  const origins = new Map<string, ReadonlyMap<string, EndpointOrigin>>();
  let foreignHints = 0;
  spec.ports.forEach((p, i) => {
    const canopyName = i === 0 ? base : `${base}_${p.port}`;
    const protocol = protocolOf(p);
    const head = parseServiceSpec({
      name: canopyName,
      port: p.port,
      ...(vips.length === 1 ? { vip: vips[0] } : vips.length > 1 ? { vips } : {}),
      ...(protocol !== undefined ? { protocol } : {}),
      loadBalancing: lb.value,
      endpoints: [],
    });
    if (!head.ok) {
      errors.push(...head.errors.map((e) => ({ path: `${at}: ${e.path}`, message: e.message })));
      return;
    }
    const built = endpointsOf(sliceList, p.name ?? '', ctx);
    foreignHints += built.foreignHints;
    origins.set(canopyName, built.origins);
    specs.push({ ...head.value, endpoints: built.endpoints });
  });
  return { specs, errors, foreignHints, origins };
}

/**
 * The annotation first, then an Istio DestinationRule, then a Kuma
 * MeshLoadBalancingStrategy, then trafficDistribution / internalTrafficPolicy.
 */
function loadBalancingOf(
  svc: KubeService,
  at: string,
  rule: LiveDestinationRule | undefined,
  strategy: LiveMeshStrategy | undefined,
): { value: Obj } | { errors: FieldError[] } {
  const annotation = svc.metadata?.annotations?.[LOAD_BALANCING_ANNOTATION];
  const path = `${at}: metadata.annotations["${LOAD_BALANCING_ANNOTATION}"]`;
  if (annotation !== undefined) {
    let value: unknown;
    try {
      value = load(annotation);
    } catch (err) {
      return { errors: [{ path, message: `is not YAML or JSON: ${(err as Error).message.split('\n')[0]}` }] };
    }
    if (!isObject(value)) return { errors: [{ path, message: 'must be a loadBalancing object (YAML or JSON)' }] };
    // Checked by the config file's own rules, with their field paths under the annotation.
    const parsed = parseServiceSpec({ name: 'x', loadBalancing: value }, path);
    if (!parsed.ok)
      return { errors: parsed.errors.map((e) => ({ ...e, path: e.path.replace(`${path}.loadBalancing`, path) })) };
    return { value };
  }
  if (rule) {
    // Istio's reading, as `canopy import istio` does; the Service's trafficDistribution applies when the
    // rule sets no locality load balancing.
    const f = new Findings();
    const td = svc.spec?.trafficDistribution;
    const istioTd: IstioTrafficDistribution | undefined =
      td === 'PreferSameZone' || td === 'PreferClose' ? 'PreferSameZone' : td === 'PreferSameNode' ? td : undefined;
    const value = readDestinationRule(f, rule.spec, `${rule.at}: spec`, istioTd);
    return f.errors.length > 0 ? { errors: f.errors } : { value };
  }
  if (strategy)
    return strategy.errors.length > 0 ? { errors: [...strategy.errors] } : { value: strategy.loadBalancing };
  const lb = kubeLoadBalancing(svc.spec?.trafficDistribution, svc.spec?.internalTrafficPolicy);
  if ('error' in lb) return { errors: [{ path: `${at}: spec.${lb.field}`, message: lb.error }] };
  return { value: lb.loadBalancing };
}

/** appProtocol first (grpc, http, h2c, tcp), then Istio's port-name prefixes (grpc-…, http-…). */
function protocolOf(p: KubeServicePort): 'grpc' | 'http' | 'tcp' | undefined {
  const ap = (p.appProtocol ?? '').toLowerCase();
  if (ap === 'grpc') return 'grpc';
  if (['http', 'http2', 'https', 'kubernetes.io/h2c', 'kubernetes.io/ws', 'kubernetes.io/wss'].includes(ap))
    return 'http';
  if (ap === 'tcp') return 'tcp';
  const name = (p.name ?? '').toLowerCase();
  if (name === 'grpc' || name.startsWith('grpc-')) return 'grpc';
  if (name === 'http' || name.startsWith('http-') || name === 'http2' || name.startsWith('http2-')) return 'http';
  return undefined;
}

/** Ready serves; serving and terminating is kube-proxy's fallback; terminating and not serving drains. */
export function healthOf(c: KubeSliceEndpoint['conditions']): Health {
  if (c?.ready !== false) return 'healthy';
  if (c.terminating === true) return c.serving === true ? 'terminating' : 'draining';
  return 'unhealthy';
}

const RANK: Readonly<Record<Health, number>> = { healthy: 3, terminating: 2, draining: 1, unhealthy: 0 };

function endpointsOf(
  slices: readonly KubeSlice[],
  portName: string,
  ctx: MapContext,
): { endpoints: Endpoint[]; foreignHints: number; origins: Map<string, EndpointOrigin> } {
  const byKey = new Map<string, Endpoint>();
  const origins = new Map<string, EndpointOrigin>();
  let foreignHints = 0;
  for (const slice of slices) {
    if (slice.addressType !== 'IPv4' && slice.addressType !== 'IPv6') continue; // FQDN: kube-proxy ignores it too
    // Istio's network label: the slice carries the Service's labels (the EndpointSlice controller copies them).
    const network = slice.metadata?.labels?.[NETWORK_LABEL] ?? ctx.cluster?.network ?? '';
    // A named cluster's name wins over the label, as istiod overrides a workload's with its cluster ID; with one
    // unnamed cluster the slice's label (the Service's, copied by the EndpointSlice controller) stands in for it.
    const cluster = ctx.cluster?.name ?? slice.metadata?.labels?.[CLUSTER_LABEL] ?? '';
    const portIndex = slice.ports?.findIndex((sp) => (sp.name ?? '') === portName) ?? -1;
    const port = slice.ports?.[portIndex]?.port;
    if (port === undefined) continue;
    const sliceName = `${slice.metadata?.namespace ?? ''}/${slice.metadata?.name ?? ''}`;
    for (const [index, e] of (slice.endpoints ?? []).entries()) {
      // "Consumers must handle different types of addresses ... only the first is used" (EndpointSlice API).
      const raw = e.addresses[0];
      if (raw === undefined || !isIp(raw)) continue;
      const address = canonicalIp(raw);
      const node = e.nodeName ?? '';
      const place = node ? ctx.node(node) : undefined;
      const zone = place?.zone || e.zone || '';
      const hinted = e.hints?.forZones
        ? forZonesLabel(
            e.hints.forZones.map((z) => z.name),
            zone,
          )
        : undefined;
      if (hinted) foreignHints++;
      const ep: Endpoint = {
        address,
        port,
        health: healthOf(e.conditions),
        weight: 1,
        locality: ctx.locality({ region: place?.region ?? '', zone, subzone: place?.subzone ?? '' }),
        network,
        node,
        cluster,
        labels: hinted ?? NO_LABELS,
      };
      const key = endpointKey(ep);
      const held = byKey.get(key);
      // The same address in two slices (a move between slices): the better condition wins, as in kube-proxy.
      if (!held || RANK[ep.health] > RANK[held.health]) {
        byKey.set(key, ep);
        origins.set(key, { slice: sliceName, endpoint: index, port: portIndex });
      }
    }
  }
  return { endpoints: [...byKey.values()], foreignHints, origins };
}
