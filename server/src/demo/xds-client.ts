/**
 * A proxyless gRPC xDS client of the demo Echo service. Each client carries
 * its own bootstrap (and so its own node.locality and ADS stream), so one
 * process can host clients in many localities.
 */
import * as grpc from '@grpc/grpc-js';
import * as grpcXds from '@grpc/grpc-js-xds';
import type { Locality } from '../domain/locality.js';
import { echoService, type WhoReply } from './echo-proto.js';

const BOOTSTRAP_OPTION = 'grpc.TEST_ONLY_DO_NOT_USE_IN_PROD.xds_bootstrap_config';
let registered = false;

export interface Bootstrap {
  readonly xds_servers: readonly object[];
  readonly node: object;
}

export function xdsBootstrap(opts: {
  serverUri: string;
  nodeId: string;
  locality: Locality;
  metadata?: Record<string, unknown>;
}): Bootstrap {
  return {
    xds_servers: [{ server_uri: opts.serverUri, channel_creds: [{ type: 'insecure' }], server_features: ['xds_v3'] }],
    node: {
      id: opts.nodeId,
      cluster: 'canopy-demo',
      locality: { region: opts.locality.region, zone: opts.locality.zone, sub_zone: opts.locality.subzone },
      metadata: opts.metadata ?? {},
    },
  };
}

export interface Tally {
  /** backend id → requests it served */
  readonly byBackend: ReadonlyMap<string, number>;
  readonly failures: number;
  readonly lastError?: string;
}

export class XdsEchoClient {
  private readonly client: grpc.Client;

  constructor(opts: { target: string; bootstrap: Bootstrap }) {
    if (!registered) {
      grpcXds.register();
      registered = true;
    }
    const Echo = echoService();
    this.client = new Echo(opts.target, grpc.credentials.createInsecure(), {
      [BOOTSTRAP_OPTION]: JSON.stringify(opts.bootstrap),
    });
  }

  who(deadlineMs = 2000): Promise<WhoReply> {
    return new Promise((resolve, reject) => {
      const call = (this.client as unknown as Record<string, (...a: unknown[]) => void>)['Who'];
      call!.call(this.client, { caller: 'demo' }, { deadline: Date.now() + deadlineMs }, (err: Error | null, r: WhoReply) =>
        err ? reject(err) : resolve(r),
      );
    });
  }

  /** Sends `n` requests; never throws for a failed request, it counts it. */
  async tally(n: number, deadlineMs = 2000): Promise<Tally> {
    const byBackend = new Map<string, number>();
    let failures = 0;
    let lastError: string | undefined;
    await Promise.all(
      Array.from({ length: n }, async () => {
        try {
          const r = await this.who(deadlineMs);
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
   * `predicate`, and returns that tally; fails with the last one seen.
   */
  async waitUntil(predicate: (t: Tally) => boolean, opts: { timeoutMs?: number; sample?: number } = {}): Promise<Tally> {
    const deadline = Date.now() + (opts.timeoutMs ?? 15_000);
    let last: Tally | undefined;
    while (Date.now() < deadline) {
      last = await this.tally(opts.sample ?? 20, 1000);
      if (predicate(last)) return last;
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(`no convergence before the deadline; last tally: ${formatTally(last)}`);
  }

  close(): void {
    this.client.close();
  }
}

export function formatTally(t: Tally | undefined): string {
  if (!t) return '(none)';
  const parts = [...t.byBackend].sort().map(([id, n]) => `${id}=${n}`);
  if (t.failures) parts.push(`failed=${t.failures}${t.lastError ? ` (${t.lastError})` : ''}`);
  return parts.join(' ') || '(nothing)';
}
