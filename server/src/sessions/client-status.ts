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
  /** The version last sent (the content hash); '' when none was. */
  readonly version: string;
  readonly state: ResourceState;
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
  readonly nodeId: string;
  readonly cluster: string;
  readonly peer: string;
  readonly connectedAt: string;
  readonly placement: Placement;
  readonly types: readonly TypeStatus[];
}
