/**
 * Cluster: one EDS cluster per service, its endpoints over ADS, round robin
 * across the localities' weights; an Envoy sidecar's carries more (envoy-cluster.ts).
 */
import { kindOf, type Client } from '../domain/client.js';
import { isLoadAware } from '../domain/load/load-aware-spec.js';
import type { Mesh } from '../domain/mesh.js';
import type { ClaCache } from '../domain/cla-cache.js';
import { encodeMessage } from '../wire/protos.js';
import { flatten, type Bytes } from '../wire/rope.js';
import {
  claOfAny,
  dnsChildNames,
  envoyDnsParts,
  isDnsService,
  parseDnsChildName,
  proxylessDnsChild,
  proxylessDnsCluster,
} from './dns-cluster.js';
import { encodeEnvoyCluster, envoyClusterShape } from './envoy-cluster.js';
import { parseIncarnatedName, type Incarnations } from './incarnations.js';
import { makeResource, type Resource } from './resource.js';
import { proxylessShareGroup, type ResourceType, type Warms } from './resource-type.js';
import { escapeSegment, LEDS_PREFIX } from './endpoint/leds-names.js';
import { CLUSTER_TYPE, ENDPOINT_TYPE, LEDS_TYPE } from './type-urls.js';

export function encodeCluster(name: string, edsServiceName: string, reportLoad = false): Uint8Array {
  return encodeMessage('envoy.config.cluster.v3.Cluster', {
    name,
    type: 'EDS',
    eds_cluster_config: { eds_config: { ads: {}, resource_api_version: 'V3' }, service_name: edsServiceName },
    lb_policy: 'ROUND_ROBIN',
    connect_timeout: { seconds: 1 },
    // Load-aware services: clients report per-locality load to this server (LRS on the xDS connection).
    ...(reportLoad ? { lrs_server: { self: {} } } : {}),
  });
}

/**
 * A service with hostname endpoints carries its clients' CLAs inside its cluster (dns-cluster.ts):
 * `claCache` orders a proxyless client's LOGICAL_DNS clusters; `envoyCla` is the ClusterLoadAssignment an
 * Envoy sidecar would get over EDS (the endpoint type's, without LEDS).
 */
export function clusterType(
  mesh: Mesh,
  incarnations: Incarnations,
  claCache?: ClaCache<Bytes>,
  envoyCla?: (service: string, client: Client) => Resource | undefined,
): ResourceType {
  // Proxyless: depends on the name alone (the service's, or its incarnation's), encoded once per name.
  const held = new Map<string, Resource>();
  // Envoy: re-encoded when the service's sidecar settings change.
  const envoy = new Map<string, { shape: string; resource: Resource }>();
  return {
    typeUrl: CLUSTER_TYPE,
    shortName: 'CDS',
    fullStateInSotw: true,
    demandScoped: true,
    pushRank: 0,
    names: () => mesh.list().map((s) => s.name),
    // A hostname service's clusters carry the client's CLA: left to the placement.
    shares: {
      shareGroup(name, client) {
        if (parseDnsChildName(name)) return undefined;
        const service = mesh.get(parseIncarnatedName(name).service);
        return service && claCache && isDnsService(service) ? undefined : proxylessShareGroup(client);
      },
    },
    resolve(name, client) {
      const child = parseDnsChildName(name);
      if (child) {
        const owner = mesh.get(child.service);
        const bytes = owner && kindOf(client) !== 'envoy' ? proxylessDnsChild(name, owner, child.key) : undefined;
        return bytes && makeResource(name, CLUSTER_TYPE, bytes);
      }
      // A re-created service's proxyless route names its incarnation's cluster (incarnations.ts);
      // the plain name stays valid, an earlier incarnation's is gone.
      const { service: serviceName, incarnation } = parseIncarnatedName(name);
      const service = mesh.get(serviceName);
      if (!service) return undefined;
      if (incarnation !== undefined && (incarnation !== incarnations.of(serviceName) || kindOf(client) === 'envoy'))
        return undefined;
      // Hostname endpoints: no EDS; the client's CLA rides in the cluster, so the cluster is per client.
      if (claCache && isDnsService(service)) {
        if (kindOf(client) === 'envoy') {
          const cla = envoyCla?.(serviceName, client);
          const bytes = cla ? claOfAny(cla.any) : flatten(claCache.lookup(service, client).bytes);
          return makeResource(name, CLUSTER_TYPE, encodeEnvoyCluster(service.spec, envoyDnsParts(service, bytes)));
        }
        const entry = claCache.lookup(service, client);
        const bytes = proxylessDnsCluster(name, service, entry.cla);
        if (bytes) return makeResource(name, CLUSTER_TYPE, bytes);
      }
      if (kindOf(client) === 'envoy') {
        const shape = envoyClusterShape(service.spec);
        const hit = envoy.get(name);
        if (hit?.shape === shape) return hit.resource;
        const resource = makeResource(name, CLUSTER_TYPE, encodeEnvoyCluster(service.spec));
        envoy.set(name, { shape, resource });
        return resource;
      }
      const reportLoad = isLoadAware(service.spec.loadBalancing.loadAware);
      const key = reportLoad ? `${name}\u0000lrs` : name;
      let r = held.get(key);
      if (!r) held.set(key, (r = makeResource(name, CLUSTER_TYPE, encodeCluster(name, serviceName, reportLoad))));
      return r;
    },
    touchedBy: (services) =>
      [...services].flatMap((s) => {
        const state = mesh.get(s);
        const children = state && isDnsService(state) ? dnsChildNames(state) : [];
        return [...incarnations.clusterNames(s), ...children];
      }),
    warming: clusterWarming(mesh, claCache),
    forget: (service) => {
      for (const n of incarnations.clusterNames(service)) {
        held.delete(n);
        held.delete(`${n}\u0000lrs`);
      }
      envoy.delete(service);
    },
  };
}

/**
 * Every cluster (an incarnation's too) reads the service's ClusterLoadAssignment; a new EDS cluster opens
 * new LEDS watches for the collections it names (Envoy's EdsClusterImpl keeps them per cluster).
 */
function clusterWarming(mesh: Mesh, claCache: ClaCache<Bytes> | undefined): Warms {
  return {
    warms: (name) => {
      const { service } = parseIncarnatedName(name);
      // A DNS cluster (STRICT_DNS, LOGICAL_DNS, an aggregate) reads no CLA: nothing to wait for.
      const state = mesh.get(service);
      if (parseDnsChildName(name) || (claCache && state && isDnsService(state))) return [];
      return [
        { typeUrl: ENDPOINT_TYPE, names: [service] },
        { typeUrl: LEDS_TYPE, prefix: `${LEDS_PREFIX}${escapeSegment(service)}/` },
      ];
    },
  };
}
