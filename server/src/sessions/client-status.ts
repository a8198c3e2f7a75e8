/** What /debug/clients shows for one connected ADS stream. */
import type { Placement } from '../domain/locality.js';

export interface NackRecord {
  readonly version: string;
  readonly nonce: string;
  readonly detail: string;
  readonly at: string;
}

/** A resource's state on one client, as CSDS names it. */
export type ResourceState = 'REQUESTED' | 'DOES_NOT_EXIST' | 'ACKED' | 'NACKED';

export interface ResourceStatus {
  readonly name: string;
  /**
   * The version last sent, as the client sees it: on SotW the version_info of
   * the response that brought its current content, on delta its own version
   * (the content hash); '' when none was.
   */
  readonly version: string;
  /** ACKED: acknowledged; REQUESTED with a version: sent, waiting for the client's ACK or NACK. */
  readonly state: ResourceState;
  /** The version the client last acknowledged ('' for none): what it keeps after a NACK. */
  readonly acked?: string;
  /** When its current content was sent (ISO 8601). */
  readonly sentAt?: string;
  /**
   * The resource as sent (an encoded google.protobuf.Any), for CSDS; undefined
   * when the server now holds other content for it. A function: JSON views
   * leave it out.
   */
  readonly body?: () => Uint8Array | undefined;
}

/** When something was sent: one per response, shared by the resources it brought. */
export interface SentStamp {
  /** The response's nonce, as a number (a stream's nonces count up across types). */
  readonly nonce: number;
  /** Date.now() when it was sent. */
  readonly at: number;
}

export interface OversizedRecord {
  readonly typeUrl: string;
  readonly bytes: number;
  readonly names: readonly string[];
  readonly at: string;
  /** How many responses to this client were over the limit. */
  readonly count: number;
}

export interface TypeStatus {
  readonly typeUrl: string;
  /** Names subscribed, or '*' for a wildcard subscription. */
  readonly subscribed: readonly string[] | '*';
  readonly versionSent: string;
  readonly nonceSent: string;
  readonly versionAcked: string;
  readonly lastNack?: NackRecord;
  /** Each resource subscribed or sent, by name (always set by the server). */
  readonly resources?: readonly ResourceStatus[];
}

export interface ClientStatus {
  readonly streamId: number;
  /** Optional only so that status fixtures written before delta existed still type-check. */
  readonly protocol?: 'sotw' | 'delta';
  /** Requests for types this server does not serve (or with no type), ignored without keeping state. */
  readonly ignoredRequests?: number;
  /** The last response over the default gRPC receive limit (4 MiB) sent to this client. */
  readonly oversized?: OversizedRecord;
  readonly nodeId: string;
  readonly cluster: string;
  /** The node's user_agent_name ('envoy', 'grpc-node-js', …), when it sent one. */
  readonly userAgent?: string;
  readonly peer: string;
  readonly connectedAt: string;
  readonly placement: Placement;
  readonly types: readonly TypeStatus[];
}
