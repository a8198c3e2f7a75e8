/**
 * What a SotW client holds of one type, as the session works it out: the hash of each resource's bytes it
 * was sent, and those it refused on their own (sotw-session.ts).
 */
import type { Resource } from '../resources/resource.js';

/** The part of a type's state these read. */
export interface HeldState {
  sent: Map<string, string | number>;
  refused?: Map<string, string | number>;
}

export function sameSet(a: ReadonlySet<string>, b: ReadonlySet<string>): boolean {
  if (a.size !== b.size) return false;
  for (const x of a) if (!b.has(x)) return false;
  return true;
}

/**
 * What the client holds once `sent` is: those resources at their hash, and of the rest of `current` what it
 * held before (a resource held back by a retry, or refused, stays not held).
 */
export function nextSent(state: HeldState, current: ReadonlyMap<string, Resource>, sent: readonly Resource[]) {
  const out = new Map<string, string | number>();
  for (const n of current.keys()) {
    const h = state.sent.get(n);
    if (h !== undefined) out.set(n, h);
  }
  for (const r of sent) out.set(r.name, r.hash);
  if (state.refused) for (const n of state.refused.keys()) if (!current.has(n)) state.refused.delete(n);
  return out;
}

export function hashesOf(resources: ReadonlyMap<string, Resource>): Map<string, string | number> {
  const out = new Map<string, string | number>();
  for (const [n, r] of resources) out.set(n, r.hash);
  return out;
}
