/**
 * A NACK on a SotW stream for a type whose responses carry only what changed
 * (RDS, EDS): the client keeps what it last acknowledged, so the names the
 * refused response carried are taken as not held (sotw-session.ts sends them
 * again in halves). A NACK normally answers the last response; one that
 * comes late, after a newer response went out (a push crossing the NACK on
 * the wire), has a stale nonce and would be ignored by the protocol, which
 * would leave its names believed held: the names of the few responses not
 * answered yet are kept for that case.
 */

/** What of a SotW type's state a NACK changes. */
export interface SotwNackState {
  sent: Map<string, string | number>;
  carried: readonly string[] | undefined;
  nacked?: Set<string>;
  refused?: Map<string, string | number>;
  retry?: string[][];
  rewarm: boolean;
  unanswered?: Unanswered[] | undefined;
  /** Nonces sent before the last one and not answered yet (any type, not only RDS and EDS). */
  pending?: string[] | undefined;
}

export interface Unanswered {
  readonly nonce: string;
  readonly names: readonly string[];
}

/** Older responses kept for a late answer; a client answers in order, so more than a few is a stuck one. */
const MAX_UNANSWERED = 4;

/** A newer response goes out while `names` (response `nonce`) is not answered yet. */
export function keepUnanswered(state: SotwNackState, nonce: string, names: readonly string[]): void {
  (state.unanswered ??= []).push({ nonce, names });
  if (state.unanswered.length > MAX_UNANSWERED) state.unanswered.shift();
}

/**
 * An answer with a stale nonce: an ACK settles that response (and older ones); a NACK makes what it carried
 * not held, unless the newer response sent it again. Returns the NACKed names, or undefined when the nonce
 * is not one kept.
 */
export function settleStale(state: SotwNackState, nonce: string, nack: boolean): readonly string[] | undefined {
  const at = state.unanswered?.findIndex((u) => u.nonce === nonce) ?? -1;
  if (at < 0) return undefined;
  const { names } = state.unanswered![at]!;
  state.unanswered!.splice(0, at + 1);
  if (!nack) return undefined;
  const again = new Set(state.carried);
  state.nacked ??= new Set();
  for (const n of names) {
    state.nacked.add(n);
    if (!again.has(n)) state.sent.delete(n);
  }
  state.rewarm = true;
  return names;
}

/**
 * A NACK of the last response (the one outstanding: a NACK of an older nonce is stale): the names it
 * carried are not held, to be sent again in halves; one name alone is refused at the hash sent. Returns
 * the names.
 */
export function rollBack(state: SotwNackState): readonly string[] {
  const names = state.carried;
  state.carried = undefined;
  if (!names) return [...state.sent.keys()];
  state.nacked ??= new Set();
  if (names.length === 1) {
    const hash = state.sent.get(names[0]!);
    if (hash !== undefined) (state.refused ??= new Map()).set(names[0]!, hash);
  }
  for (const n of names) {
    state.nacked.add(n);
    state.sent.delete(n);
  }
  if (names.length > 1) {
    const mid = Math.ceil(names.length / 2);
    (state.retry ??= []).unshift(names.slice(0, mid), names.slice(mid));
    state.rewarm = true;
  }
  return names;
}

/** Nonces a client may still answer, beyond the last one sent: a few, as for late NACKs. */
const MAX_PENDING = 16;

/** A newer response goes out while response `nonce` is not answered yet. */
export function keepPending(state: SotwNackState, nonce: string): void {
  (state.pending ??= []).push(nonce);
  if (state.pending.length > MAX_PENDING) state.pending.shift();
}

/** Whether `nonce` is one a client may still answer, other than the last one sent (a new nonce must differ). */
export function isPending(state: SotwNackState, nonce: string): boolean {
  return state.pending?.includes(nonce) === true;
}

/** An answer to an older response: it and every response before it are answered (a client answers in order). */
export function answered(state: SotwNackState, nonce: string): void {
  const at = state.pending?.indexOf(nonce) ?? -1;
  if (at >= 0) state.pending!.splice(0, at + 1);
}
