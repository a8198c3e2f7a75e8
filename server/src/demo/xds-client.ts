/**
 * A proxyless gRPC xDS client of the demo Echo service. Each client carries
 * its own bootstrap (and so its own node.locality and ADS stream), so one
 * process can host clients in many localities.
 */
import * as grpc from '@grpc/grpc-js';
import * as grpcXds from '@grpc/grpc-js-xds';
import { PriorityLoadBalancer } from '@grpc/grpc-js-xds/build/src/load-balancer-priority.js';
import type { XdsBootstrap } from './bootstrap.js';
import { echoService, type WhoReply } from './echo-proto.js';
import { CodedError } from '../domain/errors.js';

export { xdsBootstrap, type XdsBootstrap } from './bootstrap.js';

/**
 * grpc-js-xds's resolver reads a per-channel bootstrap from this option and
 * then builds a private XdsClient for that channel (resolver-xds.js), instead
 * of the process-wide one read from GRPC_XDS_BOOTSTRAP.
 */
const BOOTSTRAP_OPTION = 'grpc.TEST_ONLY_DO_NOT_USE_IN_PROD.xds_bootstrap_config';
let registered = false;

export interface Tally {
  /** backend id → requests it served */
  readonly byBackend: ReadonlyMap<string, number>;
  readonly failures: number;
  readonly lastError?: string;
}

export interface TallyOptions {
  /** Deadline of each request (default 2 s). */
  readonly deadlineMs?: number;
}

export interface WaitOptions {
  /** Give up after this long (default 15 s). */
  readonly timeoutMs?: number;
  /** Requests per sample (default 20). */
  readonly sample?: number;
}

export class XdsEchoClient {
  private readonly client: grpc.Client;

  constructor(opts: { target: string; bootstrap: XdsBootstrap }) {
    registerXdsOnce();
    const Echo = echoService();
    this.client = new Echo(opts.target, grpc.credentials.createInsecure(), {
      [BOOTSTRAP_OPTION]: JSON.stringify(opts.bootstrap),
    });
  }

  who(deadlineMs = 2000): Promise<WhoReply> {
    const call = (this.client as unknown as Record<string, grpc.requestCallback<WhoReply> | undefined>)['Who'];
    return new Promise((resolve, reject) => {
      (call as unknown as (...a: unknown[]) => void).call(
        this.client,
        { caller: 'demo' },
        { deadline: Date.now() + deadlineMs },
        (err: grpc.ServiceError | null, reply?: WhoReply) =>
          err || !reply ? reject(err ?? new CodedError('CANOPY_PEER_FAILED', 'empty reply')) : resolve(reply),
      );
    });
  }

  /** Sends `n` concurrent requests; a failed request is counted, never thrown. */
  async tally(n: number, opts: TallyOptions = {}): Promise<Tally> {
    const byBackend = new Map<string, number>();
    let failures = 0;
    let lastError: string | undefined;
    await Promise.all(
      Array.from({ length: n }, async () => {
        try {
          const r = await this.who(opts.deadlineMs ?? 2000);
          byBackend.set(r.backend_id, (byBackend.get(r.backend_id) ?? 0) + 1);
        } catch (err) {
          failures++;
          lastError = (err as Error).message;
        }
      }),
    );
    return { byBackend, failures, ...(lastError !== undefined ? { lastError } : {}) };
  }

  /**
   * xDS updates arrive asynchronously: samples until a tally satisfies
   * `predicate` and returns that tally; throws with the last one seen.
   */
  async waitUntil(predicate: (t: Tally) => boolean, opts: WaitOptions = {}): Promise<Tally> {
    const timeoutMs = opts.timeoutMs ?? 15_000;
    const deadline = Date.now() + timeoutMs;
    let last: Tally | undefined;
    while (Date.now() < deadline) {
      last = await this.tally(opts.sample ?? 20, { deadlineMs: 1000 });
      if (predicate(last)) return last;
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new CodedError(
      'CANOPY_PEER_FAILED',
      `no convergence within ${timeoutMs} ms; last tally: ${formatTally(last)}`,
    );
  }

  /** Closes the channel; its resolver unsubscribes and ends the ADS stream. */
  close(): void {
    this.client.close();
  }
}

export function createXdsEchoClient(opts: { target: string; bootstrap: XdsBootstrap }): XdsEchoClient {
  return new XdsEchoClient(opts);
}

export function formatTally(t: Tally | undefined): string {
  if (!t) return '(none)';
  const parts = [...t.byBackend].sort(([a], [b]) => a.localeCompare(b)).map(([id, n]) => `${id}=${n}`);
  if (t.failures) parts.push(`failed=${t.failures}${t.lastError ? ` (${t.lastError})` : ''}`);
  return parts.join(' ') || '(nothing)';
}

function registerXdsOnce(): void {
  if (registered) return;
  grpcXds.register();
  releasePriorityTimersOnDestroy();
  registered = true;
}

interface PriorityChild {
  maybeReactivate?: () => void;
  cancelFailoverTimer?: () => void;
}

/**
 * grpc-js-xds 1.14's priority policy leaves each child's timers armed when it
 * is destroyed: a child deactivated by a priority change keeps a 15-minute
 * retention timer (and a new child a 10 s failover timer), so a process that
 * closed all its channels still cannot exit. Disarm them before destroying.
 */
function releasePriorityTimersOnDestroy(): void {
  const proto = PriorityLoadBalancer.prototype as unknown as { destroy: () => void };
  const destroy = proto.destroy;
  proto.destroy = function (this: { children?: Map<string, PriorityChild> }): void {
    for (const child of this.children?.values() ?? []) {
      child.maybeReactivate?.();
      child.cancelFailoverTimer?.();
    }
    destroy.call(this);
  };
}
