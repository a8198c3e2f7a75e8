/**
 * The locality vectors (fixtures/locality-vectors.json, a copy of the
 * project's shared vectors, and fixtures/policy-vectors.json) written as each system's users write them: a
 * DestinationRule and a ServiceEntry; a MeshLoadBalancingStrategy and
 * Dataplanes; a Service and an EndpointSlice; ztunnel and Kmesh scopes as
 * Canopy's own config. Shared by the in-process test and the e2e test that
 * serves them through the CLI.
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { dump as stringify } from 'js-yaml';
import { parseLocality, type Placement } from '../../src/domain/locality.js';
import type { PolicySystem } from '../../src/policy/import.js';
import { endpointKey } from '../../src/domain/service.js';
import { INBOUND_TAGS_KEY, placementOf } from '../../src/sessions/placement.js';

export interface VectorPlacement {
  locality?: string | null;
  zone?: string;
  network?: string;
  node?: string;
  cluster?: string;
  labels?: Record<string, string>;
  /** Kuma: the client Dataplane's inbound tags, beside its pod labels. */
  tags?: Record<string, string>;
}
export interface VectorEndpoint extends VectorPlacement {
  id: string;
  noAddress?: boolean;
  /** Kubernetes: the zones the EndpointSlice hints the endpoint for (default: its own zone). */
  forZones?: string[];
}
export type Policy = { system: string } & Record<string, unknown>;
export interface Vector {
  id: string;
  source: string;
  description: string;
  policy: Policy;
  client: VectorPlacement;
  endpoints: VectorEndpoint[];
  expect: {
    priorities?: Record<string, number>;
    compacted?: Record<string, number>;
    selected?: string[];
    dropped?: string[];
    weights?: Record<string, number>;
    overprovisioningFactor?: number;
  };
}

export const load = (url: URL | string) => (JSON.parse(readFileSync(url, 'utf8')) as { vectors: Vector[] }).vectors;

/**
 * The shared vectors: the repository's copy, so a clone alone passes, and,
 * where the project's shared notes sit beside the clone (`../shared`, as CI
 * has them) or CANOPY_SHARED_VECTORS names a file, every vector there too, so
 * vectors added there count before the copy is refreshed. A vector both hold
 * under one id but differently is run from both, the shared one suffixed
 * `-shared`.
 */
export const SHARED_VECTORS_FILE =
  process.env['CANOPY_SHARED_VECTORS'] ??
  fileURLToPath(new URL('../../../../../shared/locality-vectors.json', import.meta.url));
export const sharedCopy = load(new URL('../../../../server/test/fixtures/locality-vectors.json', import.meta.url));
export const sharedBeside = existsSync(SHARED_VECTORS_FILE) ? load(SHARED_VECTORS_FILE) : [];
export const shared = mergeVectors(sharedCopy, sharedBeside);

export function mergeVectors(copy: readonly Vector[], beside: readonly Vector[]): Vector[] {
  const held = new Map(copy.map((v) => [v.id, JSON.stringify(v)]));
  const more = beside.flatMap((v) => {
    const mine = held.get(v.id);
    if (mine === JSON.stringify(v)) return [];
    return [mine === undefined ? v : { ...v, id: `${v.id}-shared` }];
  });
  return [...copy, ...more];
}
export const extra = load(new URL('../../../../server/test/fixtures/policy-vectors.json', import.meta.url));

/** The vectors' short label names, as the systems spell them. */
export const ISTIO_LABELS: Record<string, string> = {
  net: 'topology.istio.io/network',
  cl: 'topology.istio.io/cluster',
};
export const KUMA_LABELS: Record<string, string> = {
  node: 'k8s.io/node',
  az: 'k8s.io/az',
  region: 'k8s.io/region',
  hostname: 'kubernetes.io/hostname',
  k8szone: 'topology.kubernetes.io/zone',
};
export const rename = (labels: Record<string, string> | undefined, names: Record<string, string>) =>
  Object.fromEntries(Object.entries(labels ?? {}).map(([k, v]) => [names[k] ?? k, v]));
export const address = (i: number) => `10.0.0.${i + 1}`;

function istioDocuments(v: Vector): object[] {
  const zoneAware = v.policy['zoneAwareLbSetting'] !== undefined;
  const settingKey = zoneAware ? 'zoneAwareLbSetting' : 'localityLbSetting';
  const setting = { ...(v.policy[settingKey] as Record<string, unknown>) };
  const fp = setting['failoverPriority'] as string[] | undefined;
  if (fp) {
    setting['failoverPriority'] = fp.map((k) => {
      const [key = '', value] = k.split('=');
      return (ISTIO_LABELS[key] ?? key) + (value !== undefined ? `=${value}` : '');
    });
  }
  const host = serviceName(v);
  return [
    {
      apiVersion: 'networking.istio.io/v1',
      kind: 'DestinationRule',
      metadata: { name: v.id },
      spec: {
        host,
        trafficPolicy: {
          loadBalancer: { [settingKey]: setting },
          ...(v.policy['outlierDetection'] ? { outlierDetection: { consecutive5xxErrors: 5, interval: '10s' } } : {}),
        },
      },
    },
    {
      apiVersion: 'networking.istio.io/v1',
      kind: 'ServiceEntry',
      metadata: { name: v.id },
      spec: {
        hosts: [host],
        ports: [{ number: 80, name: 'http', protocol: 'HTTP' }],
        resolution: 'STATIC',
        endpoints: v.endpoints.map((e, i) => ({
          address: address(i),
          ...(e.locality ? { locality: e.locality } : {}),
          ...(e.labels ? { labels: rename(e.labels, ISTIO_LABELS) } : {}),
        })),
      },
    },
  ];
}

function kumaDocuments(v: Vector): object[] {
  const p = v.policy;
  const cross = p['crossZone'] as
    { failover?: { from?: string[]; to: unknown }[]; failoverThreshold?: string } | undefined;
  const local = p['localZone'] as { affinityTags: { key: string; weight?: number }[] } | undefined;
  const awareness = {
    ...(p['disabled'] ? { disabled: true } : {}),
    ...(local
      ? { localZone: { affinityTags: local.affinityTags.map((t) => ({ ...t, key: KUMA_LABELS[t.key] ?? t.key })) } }
      : {}),
    ...(cross
      ? {
          crossZone: {
            ...(cross.failover
              ? { failover: cross.failover.map((r) => ({ ...(r.from ? { from: { zones: r.from } } : {}), to: r.to })) }
              : {}),
            ...(cross.failoverThreshold ? { failoverThreshold: { percentage: cross.failoverThreshold } } : {}),
          },
        }
      : {}),
  };
  const strategy = {
    apiVersion: 'kuma.io/v1alpha1',
    kind: 'MeshLoadBalancingStrategy',
    metadata: { name: v.id, namespace: 'kuma-system', labels: { 'kuma.io/mesh': 'default' } },
    spec: {
      targetRef: { kind: 'Mesh' },
      to: [{ targetRef: { kind: 'MeshService', name: v.id }, default: { localityAwareness: awareness } }],
    },
  };
  const dataplanes = v.endpoints.map((e, i) => ({
    type: 'Dataplane',
    mesh: 'default',
    name: `${v.id}-${e.id}`,
    networking: {
      address: address(i),
      inbound: [
        { port: 80, tags: { 'kuma.io/service': v.id, 'kuma.io/zone': e.zone ?? '', ...rename(e.labels, KUMA_LABELS) } },
      ],
    },
  }));
  return Object.keys(awareness).length || p['disabled'] !== undefined ? [strategy, ...dataplanes] : dataplanes;
}

function clusterIpOf(id: string): string {
  let h = 0;
  for (const c of id) h = (h * 31 + c.charCodeAt(0)) >>> 0;
  return `10.96.${(h >>> 8) % 256}.${(h % 254) + 1}`;
}

function k8sDocuments(v: Vector): object[] {
  return [
    {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: v.id, namespace: 'default' },
      spec: {
        selector: { app: v.id },
        ports: [{ port: 80, targetPort: 8080 }],
        // One ClusterIP per Service, as a cluster assigns them: two services on one VIP:port are refused.
        clusterIP: clusterIpOf(v.id),
        ...(v.policy['trafficDistribution'] ? { trafficDistribution: v.policy['trafficDistribution'] } : {}),
        ...(v.policy['internalTrafficPolicy'] ? { internalTrafficPolicy: v.policy['internalTrafficPolicy'] } : {}),
      },
    },
    {
      apiVersion: 'discovery.k8s.io/v1',
      kind: 'EndpointSlice',
      metadata: { name: `${v.id}-abc`, labels: { 'kubernetes.io/service-name': v.id } },
      addressType: 'IPv4',
      ports: [{ name: '', port: 8080, protocol: 'TCP' }],
      endpoints: v.endpoints.map((e, i) => ({
        addresses: [address(i)],
        conditions: { ready: true },
        ...(e.zone ? { zone: e.zone, hints: { forZones: (e.forZones ?? [e.zone]).map((name) => ({ name })) } } : {}),
        ...(e.node ? { nodeName: e.node } : {}),
      })),
    },
  ];
}

/** ztunnel and Kmesh scopes are Canopy's own model: a Canopy config document. */
function nativeDocuments(v: Vector): object[] {
  const scopes = ((v.policy['routingPreference'] as string[] | undefined) ?? ['REGION', 'ZONE', 'SUBZONE']).map((s) =>
    s.toLowerCase(),
  );
  return [
    {
      services: [
        {
          name: v.id,
          loadBalancing: { mode: String(v.policy['mode'] ?? 'FAILOVER').toLowerCase(), routingPreference: scopes },
          endpoints: v.endpoints.flatMap((e, i) => {
            if (e.noAddress) return [];
            const l = parseLocality(e.locality);
            return [
              {
                address: address(i),
                port: 80,
                locality: l,
                network: e.network ?? '',
                node: e.node ?? '',
                cluster: e.cluster ?? '',
                labels: e.labels ?? {},
              },
            ];
          }),
        },
      ],
    },
  ];
}

export const SYSTEMS: Record<
  string,
  { system?: PolicySystem; documents: (v: Vector) => object[]; client: (c: VectorPlacement) => Placement }
> = {
  istio: {
    system: 'istio',
    documents: istioDocuments,
    client: (c) => {
      const { net, cl, ...labels } = c.labels ?? {};
      return { locality: parseLocality(c.locality), network: net ?? '', node: '', cluster: cl ?? '', labels };
    },
  },
  kuma: {
    system: 'kuma',
    documents: kumaDocuments,
    // Through the xDS node as a Kuma client sends it: pod labels, and its inbound tags beside them.
    client: (c) =>
      placementOf({
        id: 'client',
        cluster: '',
        userAgentName: 'envoy',
        locality: { region: '', zone: c.zone ?? '', subzone: '' },
        metadata: {
          labels: rename(c.labels, KUMA_LABELS),
          ...(c.tags ? { [INBOUND_TAGS_KEY]: rename(c.tags, KUMA_LABELS) } : {}),
        },
      }),
  },
  k8s: {
    system: 'k8s',
    documents: k8sDocuments,
    client: (c) => ({
      locality: { region: '', zone: c.zone ?? '', subzone: '' },
      network: '',
      node: c.node ?? '',
      cluster: '',
      labels: {},
    }),
  },
  ztunnel: { documents: nativeDocuments, client: native },
  kmesh: { documents: nativeDocuments, client: native },
};

export function native(c: VectorPlacement): Placement {
  return {
    locality: parseLocality(c.locality),
    network: c.network ?? '',
    node: c.node ?? '',
    cluster: c.cluster ?? '',
    labels: c.labels ?? {},
  };
}

export function dense(p: Record<string, number>): Record<string, number> {
  const levels = [...new Set(Object.values(p))].sort((a, b) => a - b);
  return Object.fromEntries(Object.entries(p).map(([k, v]) => [k, levels.indexOf(v)]));
}

/** The port an imported endpoint of vector `v` listens on. */
export function portOf(v: Vector): number {
  return v.policy.system === 'k8s' ? 8080 : 80;
}

/** A vector's documents as one YAML text, as a user writes the file. */
export function documentsText(v: Vector): string {
  const how = SYSTEMS[v.policy.system];
  if (!how) throw new Error(`${v.id}: no importer for ${v.policy.system}`);
  return how
    .documents(v)
    .map((d) => stringify(d))
    .join('---\n');
}

/** A CLA group as any reader sees it: its priority, weight and endpoint addresses. */
export interface GroupSeen {
  readonly priority: number;
  readonly weight: number;
  readonly endpoints: readonly { readonly address: string; readonly port: number }[];
}

export interface VectorOutcome {
  readonly priorities: Record<string, number>;
  readonly groupOf: Record<string, { weight: number; ids: string[] }>;
  readonly absent: string[];
  readonly overprovisioningFactor: number | undefined;
}

/** The vector's endpoint ids per priority and group, from the CLA's groups. */
export function outcomeOf(v: Vector, groups: readonly GroupSeen[], overprovisioningFactor?: number): VectorOutcome {
  const idOf = new Map(v.endpoints.map((e, i) => [endpointKey({ address: address(i), port: portOf(v) }), e.id]));
  const priorities: Record<string, number> = {};
  const groupOf: Record<string, { weight: number; ids: string[] }> = {};
  for (const g of groups) {
    const group = { weight: g.weight, ids: [] as string[] };
    for (const e of g.endpoints) {
      const id = idOf.get(endpointKey(e)) ?? '?';
      priorities[id] = g.priority;
      groupOf[id] = group;
      group.ids.push(id);
    }
  }
  const absent = v.endpoints.map((e) => e.id).filter((id) => !(id in priorities));
  return { priorities, groupOf, absent, overprovisioningFactor };
}

/** The vector's expectation, compared with what Canopy built. */
export function assertVector(v: Vector, got: VectorOutcome): void {
  const want = v.expect.compacted ?? dense(v.expect.priorities ?? {});
  assert.deepEqual(got.priorities, want, `${v.id}: priorities (dense)`);
  for (const id of v.expect.dropped ?? []) assert.ok(got.absent.includes(id), `${v.id}: ${id} should be dropped`);
  if (v.expect.selected) {
    const best = Object.keys(got.priorities).filter((id) => got.priorities[id] === 0);
    assert.deepEqual(best.sort(), [...v.expect.selected].sort(), `${v.id}: selected`);
  }
  // A Canopy locality group may hold several of the source's groups: its weight is their sum.
  for (const [id, w] of Object.entries(v.expect.weights ?? {})) {
    const g = got.groupOf[id];
    assert.ok(g, `${v.id}: ${id} has a group`);
    const sum = g.ids.reduce((s, x) => s + (v.expect.weights?.[x] ?? NaN), 0);
    assert.equal(g.weight, sum, `${v.id}: weight of the group holding ${id} (${w} in the source)`);
  }
  if (v.expect.overprovisioningFactor !== undefined) {
    assert.equal(got.overprovisioningFactor, v.expect.overprovisioningFactor, `${v.id}: overprovisioning factor`);
  }
  for (const g of Object.values(got.groupOf)) assert.ok(g.weight >= 1, `${v.id}: no weightless locality`);
}

/** The service a vector's documents define (an Istio host, or the vector's id). */
export function serviceName(v: Vector): string {
  return v.policy.system === 'istio' ? `${v.id}.example.svc` : v.id;
}
