/**
 * Kubernetes as a source of services, beside the config file and the admin
 * API: Services, EndpointSlices and Nodes listed and watched from an API
 * server (kube-watch.ts), mapped to Canopy services
 * (policy/k8s-live.ts) and written through the store (kube-writer.ts),
 * from whose watch every replica builds its mesh as for any other write.
 *
 * Nothing is written before all three lists have arrived, so the first
 * writes see every slice and node; then the source deletes what it wrote
 * before that Kubernetes no longer has, and is ready. Changes are gathered
 * per Service and written after the event burst of one turn of the event loop.
 */
import {
  CoreV1Api,
  CustomObjectsApi,
  DiscoveryV1Api,
  type KubeConfig,
  type KubernetesObject,
} from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { localityInterner } from '../domain/locality.js';
import {
  DEFAULT_SUBZONE_LABEL,
  mapService,
  nodePlace,
  type KubeService,
  type KubeSlice,
  type MapContext,
  type NodePlace,
} from '../policy/k8s-live.js';
import { EVERY_SERVICE } from '../policy/kuma-live.js';
import { byName, CrdDiscovery, type LivePolicies } from './kube-crds.js';
import { DestinationRules } from './kube-istio.js';
import { MeshStrategies } from './kube-kuma.js';
import { compactNode, compactService, compactSlice, KubeWatch } from './kube-watch.js';
import { KubeContact } from './kube-contact.js';
import { KubeWriter, type KubeWriteCounts } from './kube-writer.js';
import type { InputSkips } from '../store/input-skips.js';
import { KubeScreen } from './kube-screen.js';
import type { Store } from '../store/store.js';

export interface KubeSourceOptions {
  readonly store: Store;
  readonly config: KubeConfig;
  /** Watch only these namespaces (default: all). Nodes are always watched cluster-wide. */
  readonly namespaces?: readonly string[];
  /** The Node label read as the subzone (default topology.istio.io/subzone). */
  readonly subzoneLabel?: string;
  /** Not ready once the API server has not answered for this long (default 10 s). */
  readonly unreachableMs?: number;
  readonly log: Logger;
  /** Restart backoff of the watches (tests shorten it). */
  readonly maxBackoffMs?: number;
  /** Re-checks for Istio's and Kuma's CRDs back off to at most this (default 60 s). */
  readonly crdCheckMs?: number;
  /** One of several clusters (kube-clusters.ts): its name and network, on every endpoint. */
  readonly cluster?: { readonly name: string; readonly network: string };
  /** Where the mapped services go (default: a KubeWriter of the store; several clusters share a union). */
  readonly sink?: KubeSink;
  /** Where what the rules refuse is recorded, named by its EndpointSlice or Service (kube-screen.ts). */
  readonly skips?: InputSkips;
  /** Called once the first full sync is written (several clusters collect the lists' garbage then). */
  readonly firstSync?: () => void;
}

/** What the source writes through: a KubeWriter, or one cluster's share of a union of clusters. */
export type KubeSink = Pick<KubeWriter, 'write' | 'remove' | 'prune' | 'counts' | 'foreign'>;

/** One source's state for a status view: whether its first sync is written, and since when it fails. */
export interface KubeHealth {
  readonly synced: boolean;
  /** Epoch ms of the oldest list or watch failing now; undefined while the API server answers. */
  readonly failingSince?: number;
  readonly lastError?: string;
}

export interface KubeStats {
  readonly synced: boolean;
  readonly connected: boolean;
  readonly events: Readonly<Record<Kind, number>>;
  readonly writes: Readonly<KubeWriteCounts>;
  readonly errors: number;
  /** Services whose Kubernetes objects Canopy refuses (see the log), and names the file or the API owns. */
  readonly rejected: number;
  readonly foreign: number;
  readonly foreignHints: number;
  readonly services: number;
}

const SERVICE_NAME_LABEL = 'kubernetes.io/service-name';
type Kind = 'service' | 'endpointslice' | 'node' | LivePolicies['kind'];

export class KubeSource {
  private readonly services = new Map<string, KubeService>();
  private readonly slices = new Map<string, Map<string, KubeSlice>>();
  private readonly sliceService = new Map<string, string>();
  private readonly nodes = new Map<string, NodePlace>();
  private readonly nodeUsers = new Map<string, Set<string>>();
  private readonly names = new Map<string, readonly string[]>();
  private readonly hints = new Map<string, number>();
  private readonly dirty = new Set<string>();
  private readonly watches: KubeWatch<KubernetesObject>[] = [];
  private readonly writer: KubeSink;
  private readonly ctx: MapContext;
  private pendingLists = 0;
  private synced = false;
  private flushing: Promise<void> | undefined;
  private retry: NodeJS.Timeout | undefined;
  /** Per watch (path) that last failed: since when, why, and whether the API server refused it (401/403). */
  private readonly contact: KubeContact;
  private readonly events = { service: 0, endpointslice: 0, node: 0, destinationrule: 0, meshloadbalancingstrategy: 0 };
  private readonly rules = new DestinationRules();
  private readonly strategies = new MeshStrategies();
  private readonly crds: CrdDiscovery;
  private stopped = false;
  private readonly screen: KubeScreen;

  constructor(private readonly opts: KubeSourceOptions) {
    this.screen = new KubeScreen(opts.skips, opts.log);
    this.contact = new KubeContact(opts.log, opts.unreachableMs ?? 10_000);
    this.writer =
      opts.sink ??
      new KubeWriter(opts.store, (name, owner) =>
        opts.log.warn({ service: name, owner }, `kubernetes: "${name}" is owned by the ${owner}: not written`),
      );
    this.ctx = {
      node: (n) => this.nodes.get(n),
      locality: localityInterner(),
      destinationRule: (key) => this.rules.get(key),
      meshStrategy: (key) => this.strategies.get(key),
      ...(opts.cluster ? { cluster: opts.cluster } : {}),
    };
    this.crds = new CrdDiscovery({
      config: opts.config,
      kinds: [this.rules, this.strategies],
      served: (kind) => this.watchPolicies(kind),
      log: opts.log,
      ...(opts.crdCheckMs !== undefined ? { maxDelayMs: opts.crdCheckMs } : {}),
    });
  }

  start(): void {
    const { config } = this.opts;
    const core = config.makeApiClient(CoreV1Api);
    const discovery = config.makeApiClient(DiscoveryV1Api);
    const subzone = this.opts.subzoneLabel ?? DEFAULT_SUBZONE_LABEL;
    this.watch('node', '/api/v1/nodes', () => core.listNode(), {
      upsert: (o) => this.nodeChanged(o.metadata?.name ?? '', nodePlace(o.metadata?.labels, subzone)),
      remove: (o) => this.nodeChanged(o.metadata?.name ?? '', undefined),
      keep: compactNode,
    });
    for (const ns of this.opts.namespaces?.length ? this.opts.namespaces : [undefined]) {
      const at = ns === undefined ? '' : `/namespaces/${ns}`;
      this.watch(
        'service',
        `/api/v1${at}/services`,
        () => (ns === undefined ? core.listServiceForAllNamespaces() : core.listNamespacedService({ namespace: ns })),
        {
          upsert: (o) => this.serviceChanged(o, true),
          remove: (o) => this.serviceChanged(o, false),
          keep: compactService as (o: KubernetesObject) => KubernetesObject,
        },
      );
      this.watch(
        'endpointslice',
        `/apis/discovery.k8s.io/v1${at}/endpointslices`,
        () =>
          ns === undefined
            ? discovery.listEndpointSliceForAllNamespaces()
            : discovery.listNamespacedEndpointSlice({ namespace: ns }),
        {
          upsert: (o) => this.sliceChanged(o as KubeSlice, true),
          remove: (o) => this.sliceChanged(o as KubeSlice, false),
          keep: compactSlice as unknown as (o: KubernetesObject) => KubernetesObject,
        },
      );
    }
    for (const w of this.watches) w.start();
    // The first sync also waits for the policies whose CRDs are installed now.
    this.pendingLists++;
    void this.crds.start().finally(() => {
      if (--this.pendingLists === 0) this.schedule();
    });
  }

  /** Istio DestinationRules or Kuma MeshLoadBalancingStrategies, live, once the API server serves them. */
  private watchPolicies(kind: LivePolicies): void {
    if (this.stopped) return;
    const custom = this.opts.config.makeApiClient(CustomObjectsApi);
    const at = this.watches.length;
    const { group, version, plural } = kind;
    for (const ns of this.opts.namespaces?.length ? this.opts.namespaces : [undefined]) {
      const path = `/apis/${group}/${version}${ns === undefined ? '' : `/namespaces/${ns}`}/${plural}`;
      const list = () =>
        (ns === undefined
          ? custom.listClusterCustomObject({ group, version, plural })
          : custom.listNamespacedCustomObject({ group, version, namespace: ns, plural })) as Promise<{
          items: KubernetesObject[];
        }>;
      const changed = (o: KubernetesObject, present: boolean) => {
        for (const k of kind.change(o, present)) {
          if (k === EVERY_SERVICE) for (const key of this.services.keys()) this.markDirty(key);
          else this.markDirty(byName(k));
        }
      };
      this.watch(kind.kind, path, list, { upsert: (o) => changed(o, true), remove: (o) => changed(o, false) });
    }
    this.opts.log.info({ group, version }, `kubernetes: ${kind.what} are read live`);
    for (const w of this.watches.slice(at)) w.start();
  }

  stop(): void {
    this.stopped = true;
    this.crds.stop();
    clearTimeout(this.retry);
    for (const w of this.watches) w.stop();
  }

  /** Why /readyz should answer 503, or undefined when ready. */
  notReady(now = Date.now()): string | undefined {
    return this.contact.notReady(this.synced, now);
  }

  health(): KubeHealth {
    const since = this.contact.failingSince;
    const lastError = this.contact.lastError;
    return {
      synced: this.synced,
      ...(since !== undefined ? { failingSince: since } : {}),
      ...(lastError !== undefined ? { lastError } : {}),
    };
  }

  /** Resolves once every change seen so far is in the store. */
  async settled(): Promise<void> {
    while (this.flushing) await this.flushing;
  }

  stats(): KubeStats {
    let foreignHints = 0;
    for (const n of this.hints.values()) foreignHints += n;
    return {
      synced: this.synced,
      connected: this.contact.connected,
      events: { ...this.events },
      writes: { ...this.writer.counts },
      errors: this.contact.errors,
      rejected: this.screen.refused,
      foreign: this.writer.foreign.size,
      foreignHints,
      services: this.names.size,
    };
  }

  private watch(
    kind: Kind,
    path: string,
    list: () => Promise<{ items: KubernetesObject[] }>,
    on: {
      upsert: (o: KubernetesObject) => void;
      remove: (o: KubernetesObject) => void;
      /** What of each object is kept (kube-watch.ts): the fields Canopy reads. */
      keep?: (o: KubernetesObject) => KubernetesObject;
    },
  ): void {
    this.pendingLists++;
    const count = (f: (o: KubernetesObject) => void) => (o: KubernetesObject) => {
      this.events[kind]++;
      f(o);
    };
    const w = new KubeWatch<KubernetesObject>({
      config: this.opts.config,
      path,
      list: list as never,
      ...(on.keep ? { keep: on.keep } : {}),
      ...(this.opts.maxBackoffMs !== undefined ? { maxDelayMs: this.opts.maxBackoffMs } : {}),
      handlers: {
        upsert: count(on.upsert),
        remove: count(on.remove),
        synced: () => {
          if (--this.pendingLists === 0) this.schedule();
        },
        contact: (err) => this.contact.report(kind, path, err),
        relisted: (reason) =>
          this.opts.log.info({ resource: kind, path, reason }, `kubernetes: re-listed ${path}: ${reason}`),
      },
    });
    this.watches.push(w);
  }

  private serviceChanged(o: KubernetesObject, present: boolean): void {
    const key = `${o.metadata?.namespace}/${o.metadata?.name}`;
    if (present) this.services.set(key, o as KubeService);
    else this.services.delete(key);
    this.markDirty(key);
  }

  private sliceChanged(s: KubeSlice, present: boolean): void {
    const id = `${s.metadata?.namespace}/${s.metadata?.name}`;
    const owner = s.metadata?.labels?.[SERVICE_NAME_LABEL];
    const key = owner === undefined ? undefined : `${s.metadata?.namespace}/${owner}`;
    const was = this.sliceService.get(id);
    if (was !== undefined && (was !== key || !present)) {
      this.slices.get(was)?.delete(id);
      this.sliceService.delete(id);
      this.markDirty(was);
    }
    if (!present || key === undefined) return;
    let own = this.slices.get(key);
    if (!own) this.slices.set(key, (own = new Map()));
    own.set(id, s);
    this.sliceService.set(id, key);
    this.markDirty(key);
  }

  private nodeChanged(name: string, place: NodePlace | undefined): void {
    const was = this.nodes.get(name);
    if (place) this.nodes.set(name, place);
    else this.nodes.delete(name);
    if (was?.region === place?.region && was?.zone === place?.zone && was?.subzone === place?.subzone) return;
    for (const key of this.nodeUsers.get(name) ?? []) this.markDirty(key);
  }

  private markDirty(key: string): void {
    this.dirty.add(key);
    this.schedule();
  }

  private schedule(): void {
    if (this.flushing || this.pendingLists > 0 || this.stopped) return;
    this.flushing = new Promise<void>((resolve) => setImmediate(resolve))
      .then(() => this.flush())
      .catch((err: unknown) => {
        this.opts.log.error({ err }, 'kubernetes: writing the store failed: retrying in 1 s');
        clearTimeout(this.retry);
        this.retry = setTimeout(() => this.schedule(), 1000);
      })
      .finally(() => {
        this.flushing = undefined;
        if (this.dirty.size > 0 && this.retry === undefined) this.schedule();
      });
  }

  private async flush(): Promise<void> {
    this.retry = undefined;
    while (this.dirty.size > 0) {
      const key = this.dirty.values().next().value as string;
      this.dirty.delete(key);
      try {
        await this.flushService(key);
      } catch (err) {
        this.dirty.add(key);
        throw err;
      }
    }
    if (!this.synced) {
      const pruned = await this.writer.prune(new Set([...this.names.values()].flat()));
      this.synced = true;
      this.opts.log.info(
        { services: this.names.size, nodes: this.nodes.size, pruned: pruned.length },
        'kubernetes: first full sync written',
      );
      this.opts.firstSync?.();
    }
  }

  private async flushService(key: string): Promise<void> {
    const svc = this.services.get(key);
    const mapped = svc ? mapService(svc, this.slices.get(key)?.values() ?? [], this.ctx) : undefined;
    // What the rules refuse is left out here, named by its object (kube-screen.ts); logged once by the registry.
    const specs = this.screen.screen(key, mapped);
    if (specs === undefined) return; // refused whole: the last good state stays
    this.hints.set(key, mapped?.foreignHints ?? 0);
    for (const spec of specs) {
      await this.writer.write(spec);
      for (const e of spec.endpoints) if (e.node) this.use(e.node, key);
    }
    const now = specs.map((s) => s.name);
    for (const name of this.names.get(key) ?? []) if (!now.includes(name)) await this.writer.remove(name);
    if (now.length > 0) this.names.set(key, now);
    else this.names.delete(key);
  }

  private use(node: string, key: string): void {
    let users = this.nodeUsers.get(node);
    if (!users) this.nodeUsers.set(node, (users = new Set()));
    users.add(key);
  }
}
