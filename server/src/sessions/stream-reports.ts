/**
 * What the push pipeline tells the operator about one stream's traffic: each request's outcome counted
 * (ACK, NACK, stale nonce, refused) and logged when it matters, a NACK naming what was refused and where
 * its service came from (nack-report.ts), and a response over the size a default gRPC client accepts.
 * Counting and wording only: what a request does to the stream stays with the pipeline.
 */
import { shortTypeName } from '../resources/type-urls.js';
import type { OversizedRecord } from './client-status.js';
import { nackServiceLabel, servicesOf, shortDetail } from './nack-report.js';
import type { XdsObserver } from './observer.js';
import type { OutgoingResponse, RequestOutcome } from './session.js';
import type { XdsLog } from './stream-sink.js';

/** What the reports read and keep of a stream. */
export interface ReportedStream {
  readonly session: { readonly id: number; readonly nodeId: string };
  /** An ignored type was warned about on this stream (once per stream). */
  ignoredWarned: boolean;
  /** The last response over the size limit, for /debug/clients. */
  oversized: OversizedRecord | undefined;
}

export class StreamReports {
  constructor(
    private readonly observer: XdsObserver,
    private readonly log: XdsLog,
    /** Where a service came from (a file, the API, a Kubernetes object), named in a NACK's log line. */
    private readonly originOf: (service: string) => string | undefined,
    private readonly warnResponseBytes: number,
  ) {}

  /** Counts a request's outcome, and logs it at the level it deserves. */
  outcome(conn: ReportedStream, outcome: RequestOutcome): void {
    const stream = conn.session.id;
    const node = conn.session.nodeId;
    const type = shortTypeName(outcome.typeUrl);
    switch (outcome.kind) {
      case 'ack':
        this.observer.acked(outcome.typeUrl);
        break;
      case 'nack':
        this.nacked(stream, node, outcome);
        break;
      case 'stale':
        this.observer.staleNonce(outcome.typeUrl);
        this.log.debug({ stream, type, nonce: outcome.nonce }, 'stale nonce ignored');
        break;
      case 'ignored':
        this.observer.requestRefused?.('unserved_type');
        // Once per stream: a client looping over junk types must not flood the log either.
        if (!conn.ignoredWarned) {
          conn.ignoredWarned = true;
          this.log.warn(
            { stream, node, typeUrl: outcome.typeUrl.slice(0, 200) },
            `xds request ignored: ${outcome.detail.slice(0, 300)}`,
          );
        }
        break;
      case 'rejected':
        this.observer.requestRefused?.('over_limit');
        this.log.warn({ stream, node, type, detail: outcome.detail }, 'xds stream ended: request over the limits');
        break;
      default:
        this.log.debug({ stream, type, kind: outcome.kind }, 'xds subscribe');
    }
  }

  /** A response was written: one over `warnResponseBytes` is recorded on the stream, counted and logged. */
  wrote(conn: ReportedStream, r: OutgoingResponse): void {
    if (r.bytes.length > this.warnResponseBytes) this.oversized(conn, r);
  }

  /** A NACK, logged naming what was refused (nack-report.ts) and counted per type and service. */
  private nacked(
    stream: number,
    node: string,
    outcome: { typeUrl: string; detail: string; names?: readonly string[] },
  ) {
    const names = outcome.names ?? [];
    const services = servicesOf(names);
    const service = nackServiceLabel(names);
    this.observer.nacked(outcome.typeUrl, node, outcome.detail, names.length > 0 ? service : undefined);
    const type = shortTypeName(outcome.typeUrl);
    const origin = services.length === 1 ? this.originOf(services[0]!) : undefined;
    const what =
      services.length === 1
        ? `${type} of service "${services[0]}"${origin ? ` (from ${origin})` : ''} (${names.length} resource${names.length === 1 ? '' : 's'})`
        : `a ${type} response carrying ${names.length} resources of ${services.length} services`;
    this.log.warn(
      {
        ...{ stream, node, type, services: services.slice(0, 10), resources: names.slice(0, 10) },
        ...(origin ? { origin } : {}),
        detail: outcome.detail,
      },
      `xds NACK: client "${node}" refused ${what} and keeps what it last acknowledged: ${shortDetail(outcome.detail, 400)}`,
    );
  }

  private oversized(conn: ReportedStream, r: OutgoingResponse): void {
    const names = r.names.slice(0, 10);
    conn.oversized = {
      typeUrl: r.typeUrl,
      bytes: r.bytes.length,
      names,
      at: new Date().toISOString(),
      count: (conn.oversized?.count ?? 0) + 1,
    };
    this.observer.oversizedResponse?.(r.typeUrl);
    this.log.warn(
      {
        stream: conn.session.id,
        node: conn.session.nodeId,
        type: shortTypeName(r.typeUrl),
        bytes: r.bytes.length,
        resources: names,
      },
      `xds response of ${r.bytes.length} bytes is over ${this.warnResponseBytes}: a gRPC client with the default ` +
        'receive limit (4 MiB) ends its stream; raise grpc.max_receive_message_length on that client',
    );
  }
}
