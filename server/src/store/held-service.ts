/**
 * What a LocalStore holds of each service and what its Journal (the embedded
 * database, level-journal.ts) keeps durable: the held service, the journal's
 * interface, and a service as a journal's load gives it back.
 */
import { endpointKey, type Endpoint } from '../domain/service.js';
import type { ServiceHead, StoredService } from './store.js';

/** A service as held: the head and the endpoints by key, so a patch touches only its keys. */
export interface HeldService {
  readonly head: ServiceHead;
  readonly owner: StoredService['owner'];
  readonly fileDigest?: string;
  readonly revision: number;
  readonly endpoints: Map<string, Endpoint>;
  /**
   * The endpoints, in the map's order, while nothing has read the map (a
   * journal's load may key them only when a write needs it); undefined once
   * it has.
   */
  readonly loaded?: readonly Endpoint[] | undefined;
}

/** Where a LocalStore's writes become durable. */
export interface Journal {
  readonly description: string;
  load(): Promise<{ revision: number; services: HeldService[] }>;
  /** A group of writes that become durable together, in one synced write. */
  begin(): JournalBatch;
  /** A durable write that changes nothing: succeeds once the journal can write again after a failure. */
  probe?(): Promise<void>;
  /** Small state beside the services (Store.getState); a journal without it keeps it in memory. */
  getState?(key: string): Promise<string | undefined>;
  putState?(key: string, value: string): Promise<void>;
  close(): Promise<void>;
}

/**
 * Writes staged in order, each describing the service as it is in memory
 * right after that write; `commit` writes them all atomically and durably.
 */
export interface JournalBatch {
  put(revision: number, service: HeldService): void;
  patch(revision: number, service: HeldService, upserts: readonly Endpoint[], removals: readonly string[]): void;
  delete(revision: number, name: string): void;
  commit(): Promise<void>;
  /** Forgets what was staged (the commit failed). */
  rollback(): void;
  /** Staged writes, including those that staged nothing new (e.g. a second write of one key). */
  readonly size: number;
}

export interface JournalPut {
  readonly revision: number;
  readonly service: HeldService;
}

export function toStored(held: HeldService): StoredService {
  return {
    spec: { ...held.head, endpoints: [...(held.loaded ?? held.endpoints.values())] },
    owner: held.owner,
    ...(held.fileDigest !== undefined ? { fileDigest: held.fileDigest } : {}),
    revision: held.revision,
  };
}

/**
 * A service as loaded: its endpoints as a list, keyed by endpointKey only
 * when a write first needs the map. A start serves the list (the mesh keys
 * it itself), so a restart does not key 100k endpoints twice.
 */
export class LoadedService implements HeldService {
  declare readonly fileDigest?: string;
  private map: Map<string, Endpoint> | undefined;
  private list: readonly Endpoint[] | undefined;

  constructor(
    readonly head: ServiceHead,
    readonly owner: HeldService['owner'],
    fileDigest: string | undefined,
    readonly revision: number,
    list: readonly Endpoint[],
  ) {
    if (fileDigest !== undefined) this.fileDigest = fileDigest;
    this.list = list;
  }

  get endpoints(): Map<string, Endpoint> {
    if (!this.map) {
      const map = new Map<string, Endpoint>();
      for (const ep of this.list ?? []) map.set(endpointKey(ep), ep);
      this.map = map;
      this.list = undefined;
    }
    return this.map;
  }

  get loaded(): readonly Endpoint[] | undefined {
    return this.list;
  }
}
