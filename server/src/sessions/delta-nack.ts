/**
 * A NACK on a delta stream (xds_protocol.rst, "ACK/NACK and resource type
 * instance version"): the client rejected the whole response and holds what
 * it last acknowledged. So what the response carried is rolled back to that,
 * plain names and LEDS collection steps alike, and the next change of any of
 * them is sent as a diff against what the client really holds, never against
 * what it refused.
 *
 * One bad resource must not keep the others of its response from the client
 * (a real Envoy validates a delta response whole: one LbEndpoint with port
 * 70000 rejects every member of every collection in it). A response that
 * carried several names or globs is therefore sent again in halves, one
 * response each, and a NACKed half in halves again (bisect): what is left
 * un-acknowledged is the bad resource alone. A name or glob NACKed on its own
 * is refused at that version: not sent again until its content changes (no
 * NACK loop).
 */
import type { DeltaTypeState, SentResponse } from './delta-type-state.js';
import { halves } from './delta-type-state.js';

/** Settles a NACK of `sent`: rolls back what it carried; returns its names and globs. */
export function settleNack(state: DeltaTypeState, sent: SentResponse): readonly string[] {
  const units: string[] = [];
  const several = sent.versions.size + (sent.globs?.length ?? 0) > 1;
  for (const [name, version] of sent.versions) {
    units.push(name);
    if (version === null) {
      // A removal the client did not apply: it still holds what it acknowledged, and is told again (unless
      // the removal was all the response carried: a client refusing a removal is not told it forever).
      const acked = state.acked.get(name);
      if (several && acked !== undefined && !state.held.has(name)) state.held.set(name, acked);
      state.absent.delete(name);
      continue;
    }
    state.nacked.add(name);
    // A newer version sent since is what the client will answer next: left as it is.
    if (state.held.get(name) !== version) continue;
    const acked = state.acked.get(name);
    if (acked !== undefined) state.held.set(name, acked);
    else state.held.delete(name);
  }
  for (const step of sent.globs ?? []) {
    units.push(step.glob);
    state.globs?.rollBack(step.glob, step.now);
  }
  if (units.length > 1) {
    (state.retry ??= []).unshift(...halves(units));
  } else if (units.length === 1) {
    const [name, version] = [...sent.versions][0] ?? [];
    if (name !== undefined && version) (state.refused ??= new Map()).set(name, version);
    const step = sent.globs?.[0];
    if (step) state.globs?.refuse(step.glob, step.now);
  }
  return units;
}
