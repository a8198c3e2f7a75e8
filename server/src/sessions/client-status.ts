/** What /debug/clients shows for one connected ADS stream. */
import type { Placement } from '../domain/locality.js';

export interface NackRecord {
  readonly version: string;
  readonly nonce: string;
  readonly detail: string;
  readonly at: string;
}

export interface TypeStatus {
  readonly typeUrl: string;
  /** Names subscribed, or '*' for a wildcard subscription. */
  readonly subscribed: readonly string[] | '*';
  readonly versionSent: string;
  readonly nonceSent: string;
  readonly versionAcked: string;
  readonly lastNack?: NackRecord;
}

export interface ClientStatus {
  readonly streamId: number;
  readonly nodeId: string;
  readonly cluster: string;
  readonly peer: string;
  readonly connectedAt: string;
  readonly placement: Placement;
  readonly types: readonly TypeStatus[];
}
