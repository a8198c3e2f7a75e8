/**
 * etcd calls retried through a leader election. When the leader goes, the
 * members left elect a new one (about one to two election timeouts, 1–2 s by
 * default), and until then a write fails ("leader changed", unavailable, or
 * no answer before its deadline). etcd's own clients retry such failures;
 * the store does too, with cockatiel's exponential backoff (the policy
 * library etcd3 itself uses), each attempt bounded by its own deadline and all
 * of them by one overall deadline, after which the caller gets a 503 that
 * says how long it tried and what etcd last answered.
 *
 * A retried transaction is still guarded by the revision compare it was built
 * with: if an attempt that timed out had in fact committed, the retry's
 * compare fails and the store computes the write again against the new state.
 */
import {
  circuitBreaker,
  ConsecutiveBreaker,
  ExponentialBackoff,
  handleWhen,
  isBrokenCircuitError,
  retry,
} from 'cockatiel';
import { Etcd3, isRecoverableError, type IOptions } from 'etcd3';
import { CanopyError, CodedError } from '../../domain/errors.js';
import type { EtcdLayout } from './etcd-layout.js';
import type { Op } from './etcd-writes.js';

/** How long a write may keep retrying through an election (or a lost quorum) before it is refused. */
export const WRITE_BUDGET_MS = 5000;

/** When retrying must stop (ms since the epoch), and how long that was from the write's start (for the message). */
export interface Budget {
  readonly end: number;
  readonly ms: number;
}

export function budgetOf(ms: number): Budget {
  return { end: Date.now() + ms, ms };
}

export interface Attempt {
  /** The absolute time (ms since the epoch) this attempt's etcd call must finish by. */
  readonly deadline: number;
}

/**
 * Runs `call` until it succeeds, fails with an error retrying cannot help,
 * or the budget passes. Each attempt gets at most `attemptMs`.
 */
export async function withinBudget<T>(
  what: string,
  budget: Budget,
  attemptMs: number,
  call: (attempt: Attempt) => Promise<T>,
): Promise<T> {
  const { end } = budget;
  let attempts = 0;
  const policy = retry(
    handleWhen((err) => transient(err) && Date.now() < end - 50),
    { maxAttempts: Number.MAX_SAFE_INTEGER, backoff: new ExponentialBackoff({ initialDelay: 50, maxDelay: 500 }) },
  );
  try {
    return await policy.execute(() => {
      attempts++;
      return call({ deadline: Math.min(end, Date.now() + attemptMs) });
    });
  } catch (err) {
    if (!transient(err as Error)) throw err;
    throw new CanopyError(
      'CANOPY_NOT_READY',
      `the store (etcd) did not ${what} within ${Math.round(budget.ms)} ms (${attempts} attempt${attempts === 1 ? '' : 's'}; ` +
        `no leader or no quorum?): ${(err as Error).message}; it may not have been stored`,
    );
  }
}

/** Failures an election or a member's loss explains: etcd3's recoverable errors, a host it has set aside. */
function transient(err: Error): boolean {
  if (err instanceof CanopyError) return false;
  return (
    isRecoverableError(err) ||
    isBrokenCircuitError(err) ||
    /deadline|leader|unavailable|timed out/i.test(`${err.name} ${err.message}`)
  );
}

/**
 * etcd3's policies, as its defaults but for how long a member is set aside after three failures in a row:
 * 500 ms rather than 5 s. In an election every member fails a write ("no leader") for a second or two; with
 * the default all three were set aside for 5 s after it, and every write in that time was refused.
 */
export function etcdFaultHandling(): NonNullable<IOptions['faultHandling']> {
  return {
    host: () =>
      circuitBreaker(handleWhen(isRecoverableError), { halfOpenAfter: 500, breaker: new ConsecutiveBreaker(3) }),
    global: retry(handleWhen(isRecoverableError), { maxAttempts: 3 }),
  };
}

/** One transaction of `ops` if every named service's row is at its revision, retried within the budget. */
export async function commitTxn(
  client: Etcd3,
  layout: EtcdLayout,
  guards: readonly (readonly [string, number])[],
  ops: Op[],
  budget: Budget,
  attemptMs: number,
): Promise<{ succeeded: boolean; revision: number }> {
  const result = await withinBudget('commit the write', budget, attemptMs, ({ deadline }) => {
    const [first, ...rest] = guards;
    if (!first) throw new CodedError('CANOPY_BROKEN_INVARIANT', 'a transaction without a service to guard it');
    let txn = client.if(layout.serviceKey(first[0]), 'Mod', '==', first[1]);
    for (const [name, revision] of rest) txn = txn.and(layout.serviceKey(name), 'Mod', '==', revision);
    return txn
      .then(...ops)
      .options({ deadline })
      .commit();
  });
  return { succeeded: result.succeeded, revision: Number(result.header.revision) };
}

/** The etcd3 client of the store: these policies, and no message size limit. */
export function etcdClient(endpoints: readonly string[]): Etcd3 {
  return new Etcd3({
    hosts: endpoints.map((h) => (h.includes('://') ? h : `http://${h}`)),
    dialTimeout: 5000,
    // A 100k-endpoint service arrives as one watch response far above gRPC's 4 MB default.
    grpcOptions: { 'grpc.max_receive_message_length': -1, 'grpc.max_send_message_length': -1 },
    faultHandling: etcdFaultHandling(),
  });
}
