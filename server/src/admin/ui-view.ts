/**
 * What the web view (/ui/) draws for one service: its locality tree with
 * every endpoint (routable or not) counted per node, and the connected
 * clients and node agents placed on the node their CLA is cached under.
 *
 * The routable tree only holds healthy endpoints, so a node whose endpoints
 * are all down is missing from it; the view builds its own tree from every
 * endpoint so that such a node still shows, as 0 of N healthy. Placement
 * uses the service's routable tree, exactly as the CLA cache does.
 */
import ipaddr from 'ipaddr.js';
import { isLoadAware } from '../domain/load/load-aware-spec.js';
import type { LoadReportInput } from '../domain/load/load-explain.js';
import type { PlannedLocality } from '../domain/load/load-plan.js';
import { pathOf, type Placement } from '../domain/locality.js';
import type { ServiceState } from '../domain/mesh.js';
import { endpointKey, isRoutable, type Health } from '../domain/service.js';
import type { ClientStatus, TypeStatus } from '../sessions/client-status.js';
import { ENDPOINT_TYPE, TREE_TYPE } from '../resources/type-urls.js';

export interface ViewEndpoint {
  readonly key: string;
  readonly health: Health;
  readonly weight: number;
}

export interface ViewNode {
  /** This node's value at its scope ('' for the root and for a missing value). */
  readonly value: string;
  /** Values from the root down to this node; [] is the root. */
  readonly path: readonly string[];
  readonly healthy: number;
  /** Of the others, those winding down (draining, or terminating while not served), not failed. */
  readonly draining: number;
  readonly total: number;
  /** Sum of the healthy endpoints' weights. */
  readonly weight: number;
  readonly children: readonly ViewNode[];
  /** Leaves only, and only when the service has at most ENDPOINT_LIST_LIMIT endpoints. */
  readonly endpoints?: readonly ViewEndpoint[];
}

export type SyncState = 'acked' | 'pending' | 'nacked';

export interface ViewClient {
  readonly streamId: number;
  readonly kind: 'client' | 'agent';
  readonly nodeId: string;
  readonly cluster: string;
  readonly peer: string;
  readonly connectedAt: string;
  readonly placement: Placement;
  /** The deepest node of the routable tree the client's path reaches. */
  readonly treeNode: readonly string[];
  readonly sync: SyncState;
  readonly versionSent: string;
  readonly versionAcked: string;
  /** The NACK's error detail, while the last version sent is NACKed. */
  readonly nackDetail?: string;
}

/** The tree part of the view: a function of the service's generation alone, so it is built once per change. */
export interface TreeView {
  readonly service: string;
  readonly generation: number;
  readonly scopes: readonly string[];
  readonly mode: string;
  /** Whether leaves list their endpoints (services of at most ENDPOINT_LIST_LIMIT endpoints). */
  readonly endpointsListed: boolean;
  readonly root: ViewNode;
}

/** What the page polls: the tree and the streams placed on it (counted per node by the page). */
export interface ServiceView extends TreeView {
  readonly clients: readonly ViewClient[];
  /** A load-aware service's last interval (load-view.ts in the page draws it). */
  readonly load?: LoadPanel;
}

/** Rows the load panel lists at most, per table: the busiest first (every row: /debug/load/SERVICE). */
export const LOAD_ROWS_LIMIT = 25;

/** The load panel: per locality reported and assigned load against capacity, per client node its spill. */
export interface LoadPanel {
  readonly balancing: string;
  readonly intervalMs: number;
  readonly spillFraction: number;
  readonly offeredRps: number;
  readonly capacityRps: number;
  readonly localities: readonly (PlannedLocality & { readonly reportedRps: number })[];
  readonly localitiesTotal: number;
  readonly clientNodes: readonly {
    readonly path: string;
    readonly offeredRps: number;
    readonly unplacedRps: number;
    readonly spill: number;
    /** Locality → share of this node's load, largest first. */
    readonly shares: readonly (readonly [string, number])[];
  }[];
  readonly clientNodesTotal: number;
  readonly replicas?: readonly { readonly replica: string; readonly offeredRps: number }[];
}

/** The load panel from the load controller's last interval; the busiest rows, each list capped. */
export function loadPanel(service: ServiceState, report: LoadReportInput | undefined): LoadPanel | undefined {
  const la = service.spec.loadBalancing.loadAware;
  if (!isLoadAware(la)) return undefined;
  const localities = (report?.localities ?? [])
    .map((l) => ({ ...l, reportedRps: report?.landedRps[l.path] ?? 0 }))
    .sort((a, b) => b.assignedRps + b.reportedRps - (a.assignedRps + a.reportedRps) || compare(a.path, b.path));
  const nodes = [...(report?.clientNodes ?? [])].sort((a, b) => b.offeredRps - a.offeredRps || compare(a.path, b.path));
  return {
    balancing: la.balancing,
    intervalMs: report?.intervalMs ?? 0,
    spillFraction: report?.spillFraction ?? 0,
    offeredRps: nodes.reduce((t, n) => t + n.offeredRps, 0),
    capacityRps: localities.reduce((t, l) => t + l.capacityRps, 0),
    localities: localities.slice(0, LOAD_ROWS_LIMIT),
    localitiesTotal: localities.length,
    clientNodes: nodes.slice(0, LOAD_ROWS_LIMIT).map((n) => {
      const total = Object.values(n.weights).reduce((a, b) => a + b, 0);
      return {
        path: n.path,
        offeredRps: n.offeredRps,
        unplacedRps: n.unplacedRps,
        spill: n.spill,
        shares: Object.entries(n.weights)
          .map(([k, w]) => [k, total > 0 ? w / total : 0] as const)
          .sort((a, b) => b[1] - a[1] || compare(a[0], b[0])),
      };
    }),
    clientNodesTotal: nodes.length,
    ...(report?.shared ? { replicas: report.shared.replicas } : {}),
  };
}

/** Above this many endpoints a view lists none: the page then maps the explain view by locality. */
export const ENDPOINT_LIST_LIMIT = 5000;

interface MutableNode {
  value: string;
  path: string[];
  healthy: number;
  draining: number;
  total: number;
  weight: number;
  children: Map<string, MutableNode>;
  endpoints: ViewEndpoint[];
}

export function serviceView(service: ServiceState, streams: readonly ClientStatus[]): ServiceView {
  return { ...treeView(service), clients: placeClients(service, streams) };
}

export function treeView(service: ServiceState, listLimit = ENDPOINT_LIST_LIMIT): TreeView {
  const scopes = service.tree.scopes;
  const listed = service.endpoints.size <= listLimit;
  const root = newNode('', []);
  for (const ep of service.endpoints.values()) {
    const routable = isRoutable(ep);
    const winding = !routable && ep.health !== 'unhealthy';
    let node = root;
    count(node, routable, winding, ep.weight);
    for (const value of pathOf(scopes, ep)) {
      let child = node.children.get(value);
      if (!child) node.children.set(value, (child = newNode(value, [...node.path, value])));
      node = child;
      count(node, routable, winding, ep.weight);
    }
    if (listed) node.endpoints.push({ key: endpointKey(ep), health: ep.health, weight: ep.weight });
  }
  return {
    service: service.name,
    generation: service.generation,
    scopes,
    mode: service.spec.loadBalancing.mode,
    endpointsListed: listed,
    root: freeze(root, listed ? scopes.length : -1),
  };
}

/** The streams subscribed to this service, each on the deepest node of the routable tree its path reaches. */
export function placeClients(service: ServiceState, streams: readonly ClientStatus[]): ViewClient[] {
  const out: ViewClient[] = [];
  for (const s of streams) {
    const placed = placeStream(service, s);
    if (placed) out.push(placed);
  }
  return out;
}

/** A stream is in a service's view when it subscribes to the service's CLA (a client) or tree (a node agent). */
function placeStream(service: ServiceState, s: ClientStatus): ViewClient | undefined {
  const eds = s.types.find((t) => t.typeUrl === ENDPOINT_TYPE && subscribes(t, service.name));
  const tree = eds ? undefined : s.types.find((t) => t.typeUrl === TREE_TYPE && subscribes(t, service.name));
  const status = eds ?? tree;
  if (!status) return undefined;
  const sync = syncOf(status);
  return {
    streamId: s.streamId,
    kind: eds ? 'client' : 'agent',
    nodeId: s.nodeId,
    cluster: s.cluster,
    peer: s.peer,
    connectedAt: s.connectedAt,
    placement: s.placement,
    treeNode: service.tree.matchPlacement(s.placement).path(),
    sync,
    versionSent: status.versionSent,
    versionAcked: status.versionAcked,
    ...(sync === 'nacked' && status.lastNack ? { nackDetail: status.lastNack.detail } : {}),
  };
}

function subscribes(t: TypeStatus, name: string): boolean {
  return t.subscribed === '*' || t.subscribed.includes(name);
}

/** NACKed while the last response sent is the one NACKed; acked once its version is acknowledged. */
export function syncOf(t: TypeStatus): SyncState {
  if (t.lastNack && t.lastNack.nonce === t.nonceSent) return 'nacked';
  return t.versionSent !== '' && t.versionAcked === t.versionSent ? 'acked' : 'pending';
}

function newNode(value: string, path: string[]): MutableNode {
  return { value, path, healthy: 0, draining: 0, total: 0, weight: 0, children: new Map(), endpoints: [] };
}

function count(node: MutableNode, routable: boolean, winding: boolean, weight: number): void {
  node.total++;
  if (winding) node.draining++;
  if (routable) {
    node.healthy++;
    node.weight += weight;
  }
}

function freeze(n: MutableNode, levels: number): ViewNode {
  const children = [...n.children.values()]
    .sort((a, b) => LOCALITY_ORDER.compare(a.value, b.value))
    .map((c) => freeze(c, levels));
  return {
    value: n.value,
    path: n.path,
    healthy: n.healthy,
    draining: n.draining,
    total: n.total,
    weight: n.weight,
    children,
    ...(n.path.length === levels ? { endpoints: n.endpoints.sort((a, b) => compareEndpointKeys(a.key, b.key)) } : {}),
  };
}

/** `10.0.0.2:80` before `10.0.0.10:80` (numeric, IPv4 before IPv6, then port), not as text. */
export function compareEndpointKeys(a: string, b: string): number {
  const pa = splitKey(a);
  const pb = splitKey(b);
  if (pa.bytes.length !== pb.bytes.length) return pa.bytes.length - pb.bytes.length;
  for (let i = 0; i < pa.bytes.length; i++) if (pa.bytes[i] !== pb.bytes[i]) return pa.bytes[i]! - pb.bytes[i]!;
  return pa.port - pb.port || compare(a, b);
}

function splitKey(key: string): { bytes: number[]; port: number } {
  const at = key.lastIndexOf(':');
  const host = key.slice(0, at).replace(/^\[|\]$/g, '');
  return { bytes: ipaddr.isValid(host) ? ipaddr.parse(host).toByteArray() : [], port: Number(key.slice(at + 1)) };
}

/** Locality values in natural order: `z3` before `z12`, `rack2` before `rack10` (digits compared as numbers). */
const LOCALITY_ORDER = new Intl.Collator('en', { numeric: true });

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
