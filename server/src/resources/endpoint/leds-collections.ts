/**
 * LEDS collections, one per locality-tree leaf of a service (names in
 * leds-names.ts), each an immutable snapshot of its members shared by every
 * stream. A service change rebuilds only the collections whose members
 * changed, reusing each unchanged member's encoding: a health flip makes one
 * new snapshot holding one new member resource.
 */
import type { Mesh, ServiceState } from '../../domain/mesh.js';
import { countedStatus } from '../../domain/envoy-lb.js';
import type { Endpoint } from '../../domain/service.js';
import { collectionStem, globOf, leafPathOf, memberName, parseLedsName } from './leds-names.js';
import { makeResource, versionOf, type Resource } from '../resource.js';
import type { CollectionSnapshot } from '../resource-type.js';
import { LEDS_TYPE } from '../type-urls.js';
import { encodeMessage } from '../../wire/protos.js';

/**
 * One envoy.config.endpoint.v3.LbEndpoint: address, health_status, weight when
 * not 1. `serving`: a terminating endpoint the service serves (no healthy one left) is HEALTHY; any
 * other endpoint not healthy is UNHEALTHY, never DRAINING (domain/envoy-lb.ts `countedStatus`).
 */
export function encodeLbEndpoint(e: Endpoint, serving = false): Uint8Array {
  return encodeMessage('envoy.config.endpoint.v3.LbEndpoint', {
    endpoint: { address: { socket_address: { address: e.address, port_value: e.port } } },
    health_status: countedStatus(e.health, serving),
    ...(e.weight !== 1 ? { load_balancing_weight: { value: e.weight } } : {}),
  });
}

let nextSnapshotId = 1;
/** Changes remembered for streams catching up; one further behind looks at all its globs. */
const MAX_LOG = 65_536;

function snapshot(name: string, members: ReadonlyMap<string, Resource>): CollectionSnapshot {
  return { name, id: nextSnapshotId++, members, version: members.size ? versionOf(members) : '' };
}

interface HeldEndpoint {
  readonly ep: Endpoint;
  readonly serving: boolean;
  readonly glob: string;
  readonly member: Resource;
}

interface ServiceCollections {
  state: ServiceState;
  generation: number;
  /** Endpoint key → the endpoint as last encoded, its collection and member resource. */
  readonly endpoints: Map<string, HeldEndpoint>;
  /** Glob → endpoint keys in it. */
  readonly keys: Map<string, Set<string>>;
  /** Glob → current snapshot; an emptied collection keeps an empty snapshot until reported. */
  readonly byGlob: Map<string, CollectionSnapshot>;
  /** Globs to rebuild at the next refresh (a re-created service's old collections). */
  readonly stale: Set<string>;
}

export class LedsCollections {
  private readonly services = new Map<string, ServiceCollections>();
  /** Globs and member names changed since `touchedBy` last reported them. */
  private readonly pending = new Map<string, Set<string>>();
  /** The service of each glob that has had members (names are not parsed on every look-up). */
  private readonly serviceOf = new Map<string, string>();
  /** Every new snapshot gets the next epoch; `log[i]` is the glob of epoch `logBase + i + 1`. */
  private epoch = 0;
  private log: string[] = [];
  private logBase = 0;

  constructor(private readonly mesh: Mesh) {}

  /** The collection's current snapshot; undefined for a glob that never had members. */
  collection(glob: string): CollectionSnapshot | undefined {
    let service = this.serviceOf.get(glob);
    if (service === undefined) {
      const parsed = parseLedsName(glob);
      if (!parsed || parsed.member) return undefined;
      service = parsed.service;
    }
    return this.current(service)?.byGlob.get(glob);
  }

  /** A single member by its name. */
  member(name: string): Resource | undefined {
    const parsed = parseLedsName(name);
    const glob = globOf(name);
    if (!parsed?.member || !glob) return undefined;
    return this.current(parsed.service)?.byGlob.get(glob)?.members.get(name);
  }

  /** Globs whose snapshot changed after epoch `since`; undefined globs when the log no longer reaches back. */
  changes(since: number): { epoch: number; globs: readonly string[] | undefined } {
    if (since < this.logBase) return { epoch: this.epoch, globs: undefined };
    return { epoch: this.epoch, globs: since >= this.epoch ? [] : this.log.slice(since - this.logBase) };
  }

  /** Globs (and member names) whose snapshot changed because of these services. */
  touchedBy(services: ReadonlySet<string>): Set<string> {
    const out = new Set<string>();
    for (const s of services) {
      // Collections are built on first ask: a service no LEDS client has asked about costs nothing here.
      if (!this.services.has(s) && !this.pending.has(s)) continue;
      this.current(s);
      const names = this.pending.get(s);
      if (!names) continue;
      this.pending.delete(s);
      for (const n of names) out.add(n);
      // Emptied collections have been reported: a later subscriber finds none.
      const held = this.services.get(s);
      if (held)
        for (const [glob, snap] of held.byGlob) {
          if (snap.members.size > 0) continue;
          held.byGlob.delete(glob);
          this.serviceOf.delete(glob);
        }
    }
    return out;
  }

  /** A deleted service: its collections empty out (streams holding them are sent the removals). */
  forget(service: string): void {
    const held = this.services.get(service);
    if (!held) return;
    this.services.delete(service);
    for (const [glob, snap] of held.byGlob) {
      this.serviceOf.delete(glob);
      if (snap.members.size) this.mark(service, glob, snap.members.keys());
    }
  }

  /** Every glob of a service (tests, debug). */
  globsOf(service: string): string[] {
    return [...(this.current(service)?.byGlob.keys() ?? [])].sort();
  }

  /** The service's collections brought up to its generation. */
  private current(name: string): ServiceCollections | undefined {
    const state = this.mesh.get(name);
    let held = this.services.get(name);
    if (!state) {
      // Deleted: every collection it had is emptied.
      this.forget(name);
      return undefined;
    }
    if (!held || held.state !== state) {
      // New scopes or a re-created service: the old collections empty out, the new ones fill.
      const byGlob = new Map(held?.byGlob ?? []);
      const stale = new Set(byGlob.keys());
      held = { state, generation: -1, endpoints: new Map(), keys: new Map(), byGlob, stale };
      this.services.set(name, held);
    }
    if (held.generation !== state.generation) this.rebuild(held);
    return held;
  }

  private rebuild(held: ServiceCollections): void {
    const { state } = held;
    const scopes = state.spec.loadBalancing.routingPreference;
    const dirty = new Set<string>(held.stale);
    held.stale.clear();
    for (const [key, ep] of state.endpoints) {
      const h = held.endpoints.get(key);
      const serving = state.serves(ep);
      if (h?.ep === ep && h.serving === serving) continue;
      const stem = collectionStem(state.name, leafPathOf(scopes, ep));
      const glob = `${stem}*`;
      const fresh = makeResource(memberName(stem, ep.address, ep.port), LEDS_TYPE, encodeLbEndpoint(ep, serving));
      // Equal bytes keep the resource the snapshot already holds (a change the member does not show).
      const member = h && h.member.name === fresh.name && h.member.hash === fresh.hash ? h.member : fresh;
      if (h) {
        dirty.add(h.glob);
        held.keys.get(h.glob)?.delete(key);
      }
      dirty.add(glob);
      let keys = held.keys.get(glob);
      if (!keys) held.keys.set(glob, (keys = new Set()));
      keys.add(key);
      held.endpoints.set(key, { ep, serving, glob, member });
    }
    for (const [key, h] of held.endpoints) {
      if (state.endpoints.has(key)) continue;
      held.endpoints.delete(key);
      held.keys.get(h.glob)?.delete(key);
      dirty.add(h.glob);
    }
    for (const glob of dirty) this.rebuildCollection(held, glob);
    held.generation = state.generation;
  }

  private rebuildCollection(held: ServiceCollections, glob: string): void {
    const keys = held.keys.get(glob) ?? new Set<string>();
    const members = new Map<string, Resource>();
    const sorted = [...keys].map((k) => held.endpoints.get(k)!.member).sort((a, b) => (a.name < b.name ? -1 : 1));
    for (const m of sorted) members.set(m.name, m);
    const old = held.byGlob.get(glob);
    const changed: string[] = [];
    for (const [n, r] of members) if (old?.members.get(n)?.hash !== r.hash) changed.push(n);
    if (old) for (const n of old.members.keys()) if (!members.has(n)) changed.push(n);
    if (keys.size === 0) held.keys.delete(glob);
    if (old && changed.length === 0) return;
    if (!old && members.size === 0) return;
    held.byGlob.set(glob, snapshot(glob, members));
    if (members.size > 0) this.serviceOf.set(glob, held.state.name);
    this.mark(held.state.name, glob, changed);
  }

  private mark(service: string, glob: string, names: Iterable<string>): void {
    this.epoch++;
    this.log.push(glob);
    if (this.log.length > MAX_LOG) {
      const drop = this.log.length >> 1;
      this.log = this.log.slice(drop);
      this.logBase += drop;
    }
    let set = this.pending.get(service);
    if (!set) this.pending.set(service, (set = new Set()));
    set.add(glob);
    for (const n of names) set.add(n);
  }
}
