/**
 * The source of truth for services in this process. Every write goes through
 * here and is announced to subscribers (the push pipeline) as MeshChanges.
 */
import { Mesh, type MeshChange } from '../domain/mesh.js';
import type { Endpoint, ServiceSpec } from '../domain/service.js';

export type ChangeListener = (changes: readonly MeshChange[]) => void;

export class ServiceStore {
  readonly mesh = new Mesh();
  private readonly listeners = new Set<ChangeListener>();

  put(spec: ServiceSpec): MeshChange | undefined {
    const change = this.mesh.put(spec);
    if (change) this.emit([change]);
    return change;
  }

  /** Changes single endpoints of an existing service (an admin PATCH): no diff of the others. */
  patch(name: string, upserts: readonly Endpoint[], removals: readonly string[] = []): MeshChange | undefined {
    const change = this.mesh.patch(name, upserts, removals);
    if (change) this.emit([change]);
    return change;
  }

  delete(name: string): MeshChange | undefined {
    const change = this.mesh.delete(name);
    if (change) this.emit([change]);
    return change;
  }

  /** Makes the held services exactly `specs` (a config file reload). */
  replaceAll(specs: readonly ServiceSpec[]): MeshChange[] {
    const changes: MeshChange[] = [];
    const wanted = new Set(specs.map((s) => s.name));
    for (const s of this.mesh.list()) {
      if (!wanted.has(s.name)) {
        const c = this.mesh.delete(s.name);
        if (c) changes.push(c);
      }
    }
    for (const spec of specs) {
      const c = this.mesh.put(spec);
      if (c) changes.push(c);
    }
    if (changes.length > 0) this.emit(changes);
    return changes;
  }

  subscribe(listener: ChangeListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private emit(changes: readonly MeshChange[]): void {
    for (const l of this.listeners) l(changes);
  }
}
