/**
 * One list + watch of a Kubernetes resource through client-node's ListWatch:
 * it lists, then watches from the list's resourceVersion, keeps the last
 * resourceVersion it saw (bookmarks included, which this asks for), re-lists
 * on 410 Gone and reports a re-list's deletions. What it lacks is done here:
 * bookmarks requested, a restart after errors with jittered exponential
 * backoff (cockatiel), and whether the API server answers, for /readyz.
 *
 * ListWatch caches every object it hands out, and the source keeps them too:
 * `keep` (compactSlice, compactService, compactNode) makes each listed or
 * watched object the few fields Canopy reads before either holds it, so what
 * a cluster costs is what Canopy uses of it, not the API server's objects
 * (managedFields, status, a Node's image list, client-node's over-allocated
 * arrays; docs/kubernetes.md, "Several clusters").
 */
import { ListWatch, Watch, type KubeConfig, type KubernetesObject } from '@kubernetes/client-node';
import { ExponentialBackoff, type IBackoff } from 'cockatiel';
import { CodedError } from '../domain/errors.js';
import type { KubeMeta, KubeService, KubeSlice, KubeSliceEndpoint } from '../policy/k8s-live.js';

export interface KubeWatchHandlers<T extends KubernetesObject> {
  upsert(obj: T): void;
  remove(obj: T): void;
  /** The first list arrived (once). */
  synced(): void;
  /** The API server answered a list or opened a watch; or a list or watch failed (with the error). */
  contact(err?: unknown): void;
  /** A list after the first: the watch could not resume (410 Gone, its resourceVersion compacted away). */
  relisted?(reason: string): void;
}

export interface KubeWatchOptions<T extends KubernetesObject> {
  readonly config: KubeConfig;
  /** e.g. `/api/v1/services` or `/apis/discovery.k8s.io/v1/namespaces/NS/endpointslices`. */
  readonly path: string;
  readonly list: () => Promise<{ items: T[]; metadata?: { resourceVersion?: string } }>;
  readonly handlers: KubeWatchHandlers<T>;
  /** What is kept of each listed or watched object (default: all of it). */
  readonly keep?: (obj: T) => T;
  /** Restarts back off from this (default 250 ms) ... */
  readonly initialDelayMs?: number;
  /** ... to at most this (default 10 s). */
  readonly maxDelayMs?: number;
}

export class KubeWatch<T extends KubernetesObject> {
  private readonly lw: ListWatch<T>;
  private backoff: IBackoff<unknown> | undefined;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private listed = false;
  /** Why the watch must list again, from the API server's 410 (event or response); read by the next list. */
  private expired: string | undefined;
  private readonly factory: ExponentialBackoff<unknown>;

  constructor(private readonly opts: KubeWatchOptions<T>) {
    this.factory = new ExponentialBackoff({
      initialDelay: opts.initialDelayMs ?? 250,
      maxDelay: opts.maxDelayMs ?? 10_000,
    });
    const h = opts.handlers;
    const list = async () => {
      const listed = await opts.list().catch((err: unknown) => {
        throw tagged(err, 'list');
      });
      const result = opts.keep ? { ...listed, items: listed.items.map(opts.keep) } : listed;
      h.contact();
      if (this.listed) {
        h.relisted?.(this.expired ?? 'the watch had no resourceVersion to resume from');
        this.expired = undefined;
      }
      // After ListWatch has handed the listed items out: it does so as soon as this promise resolves.
      if (!this.listed) {
        this.listed = true;
        setImmediate(() => h.synced());
      }
      return result as never;
    };
    this.lw = new ListWatch<T>(opts.path, this.bookmarkingWatch(), list, false);
    this.lw.on('add', (o) => h.upsert(o));
    this.lw.on('update', (o) => h.upsert(o));
    this.lw.on('delete', (o) => h.remove(o));
    this.lw.on('error', (err) => this.failed(err));
  }

  start(): void {
    void this.lw.start();
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    void this.lw.stop();
  }

  /** The resourceVersion the next watch resumes from ('' = it lists first). */
  get resourceVersion(): string {
    return this.lw.latestResourceVersion();
  }

  private failed(err: unknown): void {
    if (this.stopped) return; // the abort of stop()
    this.opts.handlers.contact(err ?? new CodedError('CANOPY_PEER_FAILED', 'the watch failed'));
    this.backoff = (this.backoff ?? this.factory).next(undefined);
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      if (!this.stopped) void this.lw.start();
    }, this.backoff.duration);
    this.timer.unref();
  }

  /**
   * client-node's Watch, asked for bookmarks (so a resumed watch starts from a
   * recent resourceVersion, not one the API server has compacted away), and
   * telling when the API server accepted the watch: Watch.watch resolves only
   * after the response's status, having called `done` already if it failed.
   */
  private bookmarkingWatch(): Watch {
    const real = new Watch(this.opts.config);
    const keep = this.opts.keep;
    const watch = async (
      path: string,
      params: Record<string, unknown>,
      cb: (phase: string, obj: unknown, watchObj?: unknown) => void,
      done: (err: unknown) => void,
    ): Promise<AbortController> => {
      let failed = false;
      const seen = (phase: string, obj: unknown, watchObj?: unknown): void => {
        // ListWatch clears its resourceVersion on this event and lists again when the watch ends.
        if (phase === 'ERROR' && statusOf(obj) === 410) this.expired = goneReason(obj);
        const kept = keep && phase !== 'ERROR' && phase !== 'BOOKMARK' ? keep(obj as T) : obj;
        cb(phase, kept, watchObj);
      };
      const controller = await real.watch(path, { ...params, allowWatchBookmarks: true }, seen, (err: unknown) => {
        if (err) failed = true;
        if (statusOf(err) === 410) this.expired = goneReason(err);
        done(err ? tagged(err, 'watch') : err);
      });
      if (!failed) {
        this.backoff = undefined;
        this.opts.handlers.contact();
      }
      return controller;
    };
    return { watch } as unknown as Watch;
  }
}

/** A 410's words: the API server's message (`too old resource version: 5 (120)`), as a watch event or a response. */
function goneReason(err: unknown): string {
  const e = err as { message?: unknown; body?: unknown } | null;
  const message = typeof e?.message === 'string' && e.message ? e.message : undefined;
  return `410 Gone: ${message ?? 'the resourceVersion the watch resumed from has expired'}`;
}

/** Which request failed, for the message (kube-source.ts); the status fields ListWatch reads stay. */
function tagged(err: unknown, verb: 'list' | 'watch'): unknown {
  if (err !== null && typeof err === 'object') Object.assign(err, { verb });
  return err;
}

/** A failed list or watch, in words an operator can act on (a 403 names the RBAC Canopy needs). */
export function describeKubeError(resource: string, err: unknown): string {
  const e = err as { body?: unknown; message?: string; verb?: string };
  const status = statusOf(err);
  let detail = e.message ?? String(err);
  if (typeof e.body === 'string') {
    try {
      detail = (JSON.parse(e.body) as { message?: string }).message ?? detail;
    } catch {
      // not JSON: the message stays
    }
  }
  const what = `${e.verb ?? 'list or watch'} ${resource}`;
  if (status === 403)
    return (
      `cannot ${what}: 403 Forbidden (${detail}). Canopy needs list and watch on services and nodes and on ` +
      'discovery.k8s.io endpointslices (and on the Istio and Kuma policies it reads): the ClusterRole in ' +
      'deploy/kubernetes/rbac.yaml'
    );
  if (status === 401) return `cannot ${what}: 401 Unauthorized (${detail}): check the kubeconfig's credentials`;
  return `cannot ${what}: ${status !== undefined ? `${status} ` : ''}${detail}`;
}

/** The HTTP status of a failed list (client-node's ApiException `code`) or watch (`statusCode`). */
export function statusOf(err: unknown): number | undefined {
  const e = err as { code?: unknown; statusCode?: unknown } | null;
  return typeof e?.code === 'number' ? e.code : typeof e?.statusCode === 'number' ? e.statusCode : undefined;
}

/** What ListWatch itself reads of an object (name, namespace, resourceVersion), with the labels and annotations. */
function compactMeta(m: (KubeMeta & { resourceVersion?: string }) | undefined): KubeMeta {
  if (!m) return {};
  const annotations = m.annotations && without(m.annotations, 'kubectl.kubernetes.io/last-applied-configuration');
  return {
    ...(m.name !== undefined ? { name: m.name } : {}),
    ...(m.namespace !== undefined ? { namespace: m.namespace } : {}),
    ...(m.resourceVersion !== undefined ? { resourceVersion: m.resourceVersion } : {}),
    ...(m.labels ? { labels: m.labels } : {}),
    ...(annotations && Object.keys(annotations).length > 0 ? { annotations } : {}),
  };
}

function without(o: Readonly<Record<string, string>>, key: string): Readonly<Record<string, string>> {
  if (!(key in o)) return o;
  const { [key]: _, ...rest } = o;
  return rest;
}

/**
 * The fields of `o` that `keys` name and that are set, in that order, then
 * `also`'s (so the objects kept share their shapes); the required ones are
 * among them.
 */
function pick<T extends object>(o: T, keys: readonly (keyof T)[], also: Partial<T> = {}): T {
  const out: Partial<T> = {};
  for (const k of keys) if (o[k] !== undefined) out[k] = o[k];
  for (const k of Object.keys(also) as (keyof T)[]) if (also[k] !== undefined) out[k] = also[k];
  return out as T;
}

/** An EndpointSlice as policy/k8s-live.ts reads it (KubeSlice), its arrays of their own length. */
export function compactSlice(s: KubeSlice): KubeSlice {
  const endpoint = (e: KubeSliceEndpoint): KubeSliceEndpoint =>
    pick(e, ['nodeName', 'zone'], {
      addresses: [...e.addresses],
      ...(e.conditions ? { conditions: pick(e.conditions, ['ready', 'serving', 'terminating']) } : {}),
      ...(e.hints?.forZones ? { hints: { forZones: e.hints.forZones.map((z) => ({ name: z.name })) } } : {}),
    });
  return pick(s, ['addressType'], {
    metadata: compactMeta(s.metadata),
    ...(s.ports ? { ports: s.ports.map((p) => pick(p, ['name', 'port'])) } : {}),
    ...(s.endpoints ? { endpoints: s.endpoints.map(endpoint) } : {}),
  });
}

/** A Service as policy/k8s-live.ts reads it (KubeService): no status, no managedFields. */
export function compactService(svc: KubeService): KubeService {
  const s = svc.spec;
  const spec = s
    ? pick(s, ['type', 'clusterIP', 'trafficDistribution', 'internalTrafficPolicy'], {
        ...(s.clusterIPs ? { clusterIPs: [...s.clusterIPs] } : {}),
        ...(s.ports ? { ports: s.ports.map((p) => pick(p, ['name', 'port', 'appProtocol'])) } : {}),
      })
    : undefined;
  return { metadata: compactMeta(svc.metadata), ...(spec ? { spec } : {}) };
}

/** A Node as its place is read (its labels): no status (conditions, images), no spec. */
export function compactNode(n: { metadata?: KubeMeta }): { metadata: KubeMeta } {
  return { metadata: compactMeta(n.metadata) };
}
