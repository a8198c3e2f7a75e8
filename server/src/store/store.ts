/**
 * The Store seam: where services live between restarts and across replicas.
 * Every writer (the admin API, the config-file source) goes through it, and
 * the served `Mesh` is built only from its watch (see mesh-feed.ts), so a
 * backend is one class implementing this interface.
 *
 * Revisions are store-wide and increase with every write, as in etcd: a
 * service's `revision` is the revision of its last write, and a write can be
 * made conditional on it (`ifRevision`, 0 = "must not exist"), which is how
 * two replicas or two writers never lose each other's writes.
 */
import { CanopyError } from '../domain/errors.js';
import type { Endpoint, ServiceSpec } from '../domain/service.js';

/** Who created a service; see "Storage and ownership" in docs/operations.md. */
export type Owner = 'file' | 'api' | 'kube';

export interface StoredService {
  readonly spec: ServiceSpec;
  readonly owner: Owner;
  /**
   * Digest of the config-file entry last applied to this service. A reload
   * whose entry has the same digest leaves the service (and API patches of
   * it) alone.
   */
  readonly fileDigest?: string;
  /** Store revision of the last write to this service. */
  readonly revision: number;
}

export type StoreEvent =
  | { readonly kind: 'put'; readonly revision: number; readonly service: StoredService }
  | {
      readonly kind: 'patch';
      readonly revision: number;
      readonly name: string;
      readonly upserts: readonly Endpoint[];
      readonly removals: readonly string[];
    }
  | { readonly kind: 'delete'; readonly revision: number; readonly name: string };

export interface PutOptions {
  readonly owner: Owner;
  readonly fileDigest?: string;
  /** Write only if the service's revision is this (0: only if it does not exist). */
  readonly ifRevision?: number;
  /**
   * Keep the fileDigest the service holds at the moment of the write (an API
   * PUT taking a file-listed service over), instead of `fileDigest`.
   */
  readonly keepFileDigest?: boolean;
}

/** What an endpoint edit sees: one service's endpoints as the store holds them at the moment of the write. */
export interface EndpointView {
  readonly name: string;
  readonly size: number;
  get(key: string): Endpoint | undefined;
  /** The sum of the endpoints' weights. */
  totalWeight(): number;
}

export interface EndpointEdit {
  readonly upserts: readonly Endpoint[];
  /** Keys of endpoints to remove; keys the service does not hold are ignored. */
  readonly removals: readonly string[];
}

export interface PutEntry {
  readonly spec: ServiceSpec;
  readonly opts: PutOptions;
}

export interface Snapshot {
  readonly revision: number;
  readonly services: readonly StoredService[];
}

export interface WatchHandlers {
  /** Events in revision order, each batch after `fromRevision`. */
  onEvents(events: readonly StoreEvent[]): void;
  /** The backend lost or regained its connection (etcd); the local backend never calls it. */
  onHealth?(healthy: boolean): void;
}

export interface Store {
  /** What the backend is, for logs and /readyz ("level:/var/lib/canopy", "etcd:…"). */
  readonly description: string;
  get(name: string): Promise<StoredService | undefined>;
  list(): Promise<Snapshot>;
  /** Creates or replaces a service; resolves with the write's revision once it is durable. */
  put(spec: ServiceSpec, opts: PutOptions): Promise<number>;
  /**
   * Several puts, each with its own revision, in the order given. The embedded
   * store checks every `ifRevision` first and commits all of them in one
   * durable write or none (a StoreConflict leaves the store as it was); etcd
   * writes them one transaction each. How `canopy serve` loads a config file
   * of many services without a disk sync per service.
   */
  putMany(entries: readonly PutEntry[]): Promise<number[]>;
  /**
   * Several puts as one write, on every backend: each `ifRevision` is checked
   * first, and either all are written (one synced batch in the embedded
   * store, one transaction in etcd) or none (a StoreConflict, or the store's
   * error). Resolves with the store's revision once all are written: how
   * `canopy apply` writes a file's services all or nothing.
   */
  putAll(entries: readonly PutEntry[]): Promise<number>;
  /**
   * Upserts and removes endpoints (by endpointKey) of an existing service
   * without rewriting the rest; undefined when the service does not exist.
   */
  patchEndpoints(
    name: string,
    upserts: readonly Endpoint[],
    removals: readonly string[],
    opts?: { readonly ifRevision?: number },
  ): Promise<number | undefined>;
  /**
   * A read-modify-write of one service's endpoints: `edit` computes the change
   * from what the store holds at the moment of the write, so concurrent
   * writers never overwrite each other's changes. It may throw to refuse the
   * write (an endpoint removed meanwhile, a weight sum too large); the error
   * rejects this call and nothing is written. The embedded store runs it in
   * its write order; etcd runs it again after each lost compare-and-swap.
   * Undefined when the service does not exist.
   */
  editEndpoints(name: string, edit: (current: EndpointView) => EndpointEdit): Promise<number | undefined>;
  /** Undefined when the service does not exist. */
  delete(name: string, opts?: { readonly ifRevision?: number }): Promise<number | undefined>;
  /** Reports every write after `fromRevision`; returns a function that stops the watch. */
  watch(fromRevision: number, handlers: WatchHandlers): () => void;
  /**
   * Small server state kept beside the services, by key: the last value put, or undefined. Not watched,
   * without a revision, not synced on its own (it survives a killed process, not always a power cut): what
   * a restarted `canopy serve` may pick up, such as the load-aware plan (serve/load-keep.ts). Whoever reads
   * it validates it: another version or replica may have written it.
   */
  getState(key: string): Promise<string | undefined>;
  putState(key: string, value: string): Promise<void>;
  close(): Promise<void>;
}

/** A conditional write lost against another writer: re-read and decide again. */
export class StoreConflict extends CanopyError {
  constructor(name: string, expected: number, actual: number) {
    super(
      'CANOPY_CONFLICT',
      `service "${name}" changed underneath this write (expected revision ${expected}, found ${actual})`,
    );
    this.name = 'StoreConflict';
  }
}

/** A spec without its endpoints: what backends store once per service, apart from the endpoints. */
export type ServiceHead = Omit<ServiceSpec, 'endpoints'>;

export function headOf(spec: ServiceSpec): ServiceHead {
  // Not `{ ...spec }`: after a patch `endpoints` is a getter that would build the whole list.
  const out: Record<string, unknown> = {};
  for (const k of Object.keys(spec)) if (k !== 'endpoints') out[k] = (spec as unknown as Record<string, unknown>)[k];
  return out as unknown as ServiceHead;
}
