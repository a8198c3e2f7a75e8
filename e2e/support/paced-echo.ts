/**
 * Paced load for the demo Echo service (gRPC): a plain gRPC client for an Envoy
 * listener, and a loop that sends a set number of requests a second (in 50 ms
 * ticks, owed by the clock; bounded in time) through any client, recording which backend served
 * each request and when, and every failure with its message.
 */
import * as grpc from '@grpc/grpc-js';
import { echoService, type WhoReply } from '../../server/src/demo/echo-proto.js';

export interface EchoCaller {
  who(deadlineMs?: number): Promise<WhoReply>;
}

/** A plain gRPC Echo client (no xDS) for an Envoy sidecar's outbound listener at `target` (HOST:PORT). */
export class DirectEchoClient implements EchoCaller {
  private readonly client: grpc.Client;

  constructor(target: string) {
    const Echo = echoService();
    this.client = new Echo(target, grpc.credentials.createInsecure());
  }

  who(deadlineMs = 2000): Promise<WhoReply> {
    const call = (this.client as unknown as Record<string, (...a: unknown[]) => void>)['Who']!;
    return new Promise((resolve, reject) => {
      call.call(
        this.client,
        { caller: 'e2e' },
        { deadline: Date.now() + deadlineMs },
        (err: grpc.ServiceError | null, reply?: WhoReply) =>
          err || !reply ? reject(err ?? new Error('empty reply')) : resolve(reply),
      );
    });
  }

  close(): void {
    this.client.close();
  }
}

export interface Served {
  readonly at: number;
  readonly backend: string;
}

export interface PacedLoad {
  readonly served: Served[];
  readonly errors: { readonly at: number; readonly message: string }[];
  /** Changes the rate from the next tick on. */
  setRate(rps: number): void;
  /** Stops sending and waits (up to the deadline) for the requests in flight. */
  stop(): Promise<void>;
}

/** Sends `rps` requests a second through `client` until stopped, or for `maxMs` at most. */
export function pacedLoad(client: EchoCaller, rps: number, maxMs: number, deadlineMs = 5000): PacedLoad {
  const served: Served[] = [];
  const errors: { at: number; message: string }[] = [];
  const inFlight = new Set<Promise<void>>();
  let rate = rps;
  let owed = 0;
  const started = Date.now();
  let last = started;
  const timer = setInterval(() => {
    const now = Date.now();
    if (now - started > maxMs) return clearInterval(timer);
    // By the clock, not by ticks: a tick that comes late (a busy machine) sends what is owed, so the rate
    // each report interval sees is the rate asked for.
    owed += (rate * (now - last)) / 1000;
    last = now;
    for (; owed >= 1; owed--) {
      const p = client.who(deadlineMs).then(
        (r) => void served.push({ at: Date.now(), backend: r.backend_id }),
        (err: Error) => void errors.push({ at: Date.now(), message: err.message }),
      );
      inFlight.add(p);
      void p.finally(() => inFlight.delete(p));
    }
  }, 50);
  return {
    served,
    errors,
    setRate: (r) => {
      rate = r;
    },
    stop: async () => {
      clearInterval(timer);
      await Promise.all([...inFlight]);
    },
  };
}

/** Requests served between two times, by what `keyOf` makes of the backend id. */
export function countBy(
  served: readonly Served[],
  from: number,
  to: number,
  keyOf: (backend: string) => string,
): Record<string, number> {
  const out: Record<string, number> = {};
  for (const s of served) if (s.at >= from && s.at < to) out[keyOf(s.backend)] = (out[keyOf(s.backend)] ?? 0) + 1;
  return out;
}
