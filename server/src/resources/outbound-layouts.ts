/**
 * The mesh's outbound layouts (domain/outbound.ts), one per mode, computed
 * again only when a service is created, deleted or changes a setting: shared
 * by the listener and route types, so both see the same groups.
 */
import type { Client } from '../domain/client.js';
import type { Mesh } from '../domain/mesh.js';
import { outboundLayout, type OutboundLayout, type OutboundMode } from '../domain/outbound.js';

export class OutboundLayouts {
  private version = -1;
  private readonly byMode = new Map<OutboundMode, OutboundLayout>();
  /** Every shared name a layout has had, so a change can name the ones that went away. */
  private readonly shared = new Set<string>();

  constructor(private readonly mesh: Mesh) {}

  get(mode: OutboundMode): OutboundLayout {
    if (this.version !== this.mesh.layoutVersion) {
      this.byMode.clear();
      this.version = this.mesh.layoutVersion;
    }
    let layout = this.byMode.get(mode);
    if (!layout) {
      layout = outboundLayout(
        this.mesh.list().map((s) => s.spec),
        mode,
      );
      this.byMode.set(mode, layout);
      for (const name of layout.groups.keys()) if (name.includes('|')) this.shared.add(name);
      for (const name of layout.routes.keys()) if (name.includes('|')) this.shared.add(name);
    }
    return layout;
  }

  /**
   * The names a change to `services` touches, for a type that last asked at
   * `seen.version`: their own, and when the layout has changed since, every
   * name (a service joining a port renames its neighbours' listener).
   */
  touched(services: ReadonlySet<string>, seen: { version: number }, extra: readonly string[] = []): Iterable<string> {
    if (seen.version === this.mesh.layoutVersion) return services;
    seen.version = this.mesh.layoutVersion;
    return new Set([...services, ...this.mesh.list().map((s) => s.name), ...this.sharedNames(), ...extra]);
  }

  /** Listener and route names that hold several services, now or before. */
  sharedNames(): ReadonlySet<string> {
    this.get('transparent');
    this.get('local');
    return this.shared;
  }
}

export function outboundModeOf(client: Client): OutboundMode {
  return client.outboundAddress !== undefined ? 'local' : 'transparent';
}

/**
 * The client's view of a set of services: all of them, or (lazy xDS) those in its demand set and those
 * in `kept` (what it reaches on demand).
 */
export function demanded(client: Client, names: readonly string[], kept: readonly string[] = []): Set<string> {
  const demand = client.demand;
  if (!demand) return new Set(names);
  const now = Date.now();
  const keep = new Set(kept);
  return new Set(names.filter((n) => keep.has(n) || demand.has(n, now)));
}
