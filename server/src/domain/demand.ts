/**
 * Lazy xDS: the services one sidecar uses. Its demand set is what it declares
 * (node metadata, like an Istio Sidecar's egress hosts) plus what it asks for
 * by name (on-demand CDS over delta, or a named LDS/CDS subscription). A
 * service it stops asking for stays for `unusedTimeoutMs` after the last
 * request naming it, so a sidecar that briefly drops a name does not churn.
 * Pure: the caller passes the time.
 */
import { isSharedName } from './outbound.js';

export interface LazySettings {
  /** Mesh-wide switch; a node may override it (`canopy.lazy` in its metadata). Default off: full LDS/CDS. */
  readonly enabled: boolean;
  readonly unusedTimeoutMs: number;
}

export const DEFAULT_LAZY: LazySettings = { enabled: false, unusedTimeoutMs: 300_000 };

export class DemandSet {
  private declared: ReadonlySet<string>;
  /** Subscribed by name now, with how many subscriptions (types) name it. */
  private readonly inUse = new Map<string, number>();
  /** Released names → when the last subscription naming them went. */
  private readonly releasedAt = new Map<string, number>();

  constructor(
    declared: Iterable<string>,
    readonly unusedTimeoutMs: number,
  ) {
    this.declared = new Set(declared);
  }

  /** A reconnect may bring a new bootstrap: its declared names replace the old ones. */
  declare(names: Iterable<string>): void {
    this.declared = new Set(names);
  }

  use(names: Iterable<string>): void {
    for (const n of names) {
      this.inUse.set(n, (this.inUse.get(n) ?? 0) + 1);
      this.releasedAt.delete(n);
    }
  }

  release(names: Iterable<string>, now: number): void {
    for (const n of names) {
      const count = (this.inUse.get(n) ?? 0) - 1;
      if (count > 0) this.inUse.set(n, count);
      else if (this.inUse.delete(n)) this.releasedAt.set(n, now);
    }
  }

  has(name: string, now: number): boolean {
    // A listener shared by several services: its resolver keeps only the demanded ones.
    if (isSharedName(name)) return true;
    if (this.declared.has(name) || this.inUse.has(name)) return true;
    const at = this.releasedAt.get(name);
    if (at === undefined) return false;
    if (now - at < this.unusedTimeoutMs) return true;
    this.releasedAt.delete(name);
    return false;
  }

  /** The demanded names among `names`. */
  filter(names: Iterable<string>, now: number): string[] {
    const out: string[] = [];
    for (const n of names) if (this.has(n, now)) out.push(n);
    return out;
  }
}
