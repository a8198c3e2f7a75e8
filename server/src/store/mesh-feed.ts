/**
 * The served Mesh, built only from a Store: a snapshot at open, then the
 * store's watch. Every replica builds its Mesh this way, so all of them end
 * up with the same services and therefore the same content-hash versions.
 */
import { Mesh, type MeshChange } from '../domain/mesh.js';
import type { Store, StoreEvent } from './store.js';

export type ChangeListener = (changes: readonly MeshChange[]) => void;

/** What readers of the served services need; nothing here writes. */
export type MeshView = Pick<Mesh, 'get' | 'list' | 'size'>;

export class MeshFeed {
  readonly mesh = new Mesh();
  private applied = 0;
  private healthy = true;
  private readonly listeners = new Set<ChangeListener>();
  private waiters: { revision: number; resolve: () => void }[] = [];
  private stopWatch: () => void = () => {};

  private constructor() {}

  static async open(store: Store): Promise<MeshFeed> {
    const feed = new MeshFeed();
    const snapshot = await store.list();
    for (const s of snapshot.services) feed.mesh.put(s.spec);
    feed.applied = snapshot.revision;
    feed.stopWatch = store.watch(snapshot.revision, {
      onEvents: (events) => feed.apply(events),
      onHealth: (healthy) => {
        feed.healthy = healthy;
      },
    });
    return feed;
  }

  /** The last store revision reflected in the mesh. */
  get revision(): number {
    return this.applied;
  }

  /** False while the backend is unreachable: the mesh is the last state seen. */
  get connected(): boolean {
    return this.healthy;
  }

  subscribe(listener: ChangeListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Resolves once the mesh reflects `revision`: a writer's read-your-writes. */
  caughtUp(revision: number): Promise<void> {
    if (revision <= this.applied) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push({ revision, resolve }));
  }

  close(): void {
    this.stopWatch();
    for (const w of this.waiters) w.resolve();
    this.waiters = [];
  }

  private apply(events: readonly StoreEvent[]): void {
    const changes: MeshChange[] = [];
    // One batch may hold several events of one revision (a store's resync after a gap).
    const from = this.applied;
    for (const e of events) {
      if (e.revision <= from) continue; // replayed after a reconnect
      const change =
        e.kind === 'put'
          ? this.mesh.put(e.service.spec)
          : e.kind === 'patch'
            ? this.mesh.patch(e.name, e.upserts, e.removals)
            : this.mesh.delete(e.name);
      if (change) merge(changes, change);
      this.applied = e.revision;
    }
    if (changes.length > 0) for (const l of this.listeners) l(changes);
    const due = this.waiters.filter((w) => w.revision <= this.applied);
    if (due.length === 0) return;
    this.waiters = this.waiters.filter((w) => w.revision > this.applied);
    for (const w of due) w.resolve();
  }
}

/**
 * Adds `change`, folding an update into the previous change of the same
 * service when that is the last one: a group commit of 64 PATCHes of one
 * service is one change to log and push, not 64.
 */
function merge(changes: MeshChange[], change: MeshChange): void {
  const last = changes[changes.length - 1];
  if (!last || last.service !== change.service || change.kind !== 'updated' || last.kind === 'deleted') {
    changes.push(change);
    return;
  }
  const endpoints = new Set(last.endpoints);
  for (const k of change.endpoints) endpoints.add(k);
  changes[changes.length - 1] = { ...last, endpoints: [...endpoints] };
}
