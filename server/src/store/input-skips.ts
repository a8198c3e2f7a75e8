/**
 * What Canopy leaves out of what it serves, and why: the endpoints and
 * services that some source wrote but the admin API's rules refuse
 * (domain/spec-screen.ts). The Mesh feed (mesh-feed.ts) and the Kubernetes
 * source (kube-source.ts, which names the EndpointSlice or Service at fault)
 * record here; /api/v1/skipped, `canopy get skipped`, the web view and
 * /metrics read it. An entry lasts while the object at fault does: a fixed or
 * deleted object takes its entry away.
 */
import type { Logger } from 'pino';

export interface InputSkip {
  /** Who wrote it: `file`, `api`, `kube`, or `store` (a row of unknown owner). */
  readonly source: string;
  /** The object at fault: `EndpointSlice repro/oops-1`, `Service repro/oops`, `service web.shop`. */
  readonly object: string;
  /** The Canopy service it belongs to (for Kubernetes, `NAME.NAMESPACE`). */
  readonly service: string;
  /** The field at fault in that object (`ports[0].port`, `endpoints[3].address`; '' for all of it). */
  readonly path: string;
  /** The value at fault, as JSON text. */
  readonly value?: string;
  readonly message: string;
  /** A bounded name for the metric label: `endpoint.port`, `service.loadBalancing`, … */
  readonly reason: string;
  /** Whether the service is served without it (`endpoint`) or left out whole (`service`). */
  readonly left: 'endpoint' | 'service';
  /** Endpoints left out by this one entry (a slice's bad port leaves out each of its endpoints). */
  readonly endpoints?: number;
  /** When this entry was first recorded (ISO 8601). */
  readonly since?: string;
}

export interface SkipListener {
  /** A new entry, or one whose field, value or message changed: logged once, counted once. */
  added(skip: InputSkip): void;
  removed?(skip: InputSkip): void;
}

export class InputSkips {
  /** Per scope (one writer's unit: a feed's service, a Kubernetes Service), entries by id. */
  private readonly scopes = new Map<string, Map<string, InputSkip>>();
  private readonly listeners = new Set<SkipListener>();

  listen(l: SkipListener): () => void {
    this.listeners.add(l);
    return () => this.listeners.delete(l);
  }

  /** Replaces every entry of `scope`. */
  replace(scope: string, entries: ReadonlyMap<string, InputSkip>): void {
    const old = this.scopes.get(scope);
    const next = new Map<string, InputSkip>();
    for (const [id, skip] of entries) next.set(id, this.kept(old?.get(id), skip));
    for (const [id, skip] of old ?? []) if (!next.has(id)) this.gone(skip);
    if (next.size > 0) this.scopes.set(scope, next);
    else this.scopes.delete(scope);
  }

  /** Sets or clears one entry of `scope`. */
  update(scope: string, id: string, skip: InputSkip | undefined): void {
    let entries = this.scopes.get(scope);
    const old = entries?.get(id);
    if (!skip) {
      if (!old) return;
      entries!.delete(id);
      if (entries!.size === 0) this.scopes.delete(scope);
      this.gone(old);
      return;
    }
    if (!entries) this.scopes.set(scope, (entries = new Map()));
    entries.set(id, this.kept(old, skip));
  }

  has(scope: string, id?: string): boolean {
    const entries = this.scopes.get(scope);
    return id === undefined ? entries !== undefined : entries?.has(id) === true;
  }

  ids(scope: string): string[] {
    return [...(this.scopes.get(scope)?.keys() ?? [])];
  }

  list(): InputSkip[] {
    const out: InputSkip[] = [];
    for (const entries of this.scopes.values()) out.push(...entries.values());
    return out.sort((a, b) => (a.service < b.service ? -1 : a.service > b.service ? 1 : a.path < b.path ? -1 : 1));
  }

  /** Entries now, per source and reason. */
  counts(): { source: string; reason: string; count: number }[] {
    const by = new Map<string, { source: string; reason: string; count: number }>();
    for (const entries of this.scopes.values())
      for (const s of entries.values()) {
        const k = `${s.source}\u0000${s.reason}`;
        const c = by.get(k);
        if (c) c.count++;
        else by.set(k, { source: s.source, reason: s.reason, count: 1 });
      }
    return [...by.values()];
  }

  /** The entry to hold: the old one when nothing an operator reads changed, else the new one, announced. */
  private kept(old: InputSkip | undefined, skip: InputSkip): InputSkip {
    if (old && same(old, skip)) return old.endpoints === skip.endpoints ? old : { ...skip, since: old.since! };
    const added = { ...skip, since: new Date().toISOString() };
    for (const l of this.listeners) l.added(added);
    return added;
  }

  private gone(skip: InputSkip): void {
    for (const l of this.listeners) l.removed?.(skip);
  }
}

function same(a: InputSkip, b: InputSkip): boolean {
  return (
    a.object === b.object && a.path === b.path && a.value === b.value && a.message === b.message && a.left === b.left
  );
}

/** The one log line per entry: a warning naming the object, the field and the value, and a note when it goes. */
export function logSkips(skips: InputSkips, log: Pick<Logger, 'warn' | 'info'>): () => void {
  return skips.listen({
    added: (s) =>
      log.warn(
        { source: s.source, object: s.object, service: s.service, field: s.path, value: s.value, reason: s.reason },
        `input skipped: ${s.object}: ${s.path ? `${s.path}: ` : ''}${s.message}` +
          (s.left === 'service' ? ' (the service is left out)' : ' (left out; the rest of the service is served)'),
      ),
    removed: (s) =>
      log.info({ source: s.source, object: s.object, field: s.path }, `input no longer skipped: ${s.object}`),
  });
}
