/**
 * What the xDS layer reports as it works. main wires it to prom-client and
 * pino; the xDS layer itself knows neither.
 */
export const REFUSAL_REASONS = [
  'unserved_type',
  'over_limit',
  'streams_per_connection',
  'names_per_connection',
  'bytes_per_connection',
  'subscription_budget',
] as const;
export type RefusalReason = (typeof REFUSAL_REASONS)[number];

export interface XdsObserver {
  streamOpened(nodeId: string): void;
  streamClosed(nodeId: string): void;
  /** One DiscoveryResponse written. */
  responseSent(typeUrl: string, resources: number): void;
  /** A response pushed because of a change, `seconds` after the change was made. */
  pushed(typeUrl: string, seconds: number): void;
  acked(typeUrl: string): void;
  /** `service`: the one service the NACKed response carried, or nack-report.ts's SEVERAL_SERVICES. */
  nacked(typeUrl: string, nodeId: string, detail: string, service?: string): void;
  staleNonce(typeUrl: string): void;
  /**
   * A request refused: for a type not served here (no state kept), over a stream's limits, or over what a
   * connection or all clients may hold (stream ended).
   */
  requestRefused?(reason: RefusalReason): void;
  /** A response over gRPC's default 4 MiB receive limit was written. */
  oversizedResponse?(typeUrl: string): void;
}

export const nullObserver: XdsObserver = {
  streamOpened() {},
  streamClosed() {},
  responseSent() {},
  pushed() {},
  acked() {},
  nacked() {},
  staleNonce() {},
};

/** Reports to every observer given, in order. */
export function teeObserver(...observers: readonly XdsObserver[]): XdsObserver {
  return {
    streamOpened: (nodeId) => observers.forEach((o) => o.streamOpened(nodeId)),
    streamClosed: (nodeId) => observers.forEach((o) => o.streamClosed(nodeId)),
    responseSent: (typeUrl, resources) => observers.forEach((o) => o.responseSent(typeUrl, resources)),
    pushed: (typeUrl, seconds) => observers.forEach((o) => o.pushed(typeUrl, seconds)),
    acked: (typeUrl) => observers.forEach((o) => o.acked(typeUrl)),
    nacked: (typeUrl, nodeId, detail, service) => observers.forEach((o) => o.nacked(typeUrl, nodeId, detail, service)),
    staleNonce: (typeUrl) => observers.forEach((o) => o.staleNonce(typeUrl)),
    requestRefused: (reason) => observers.forEach((o) => o.requestRefused?.(reason)),
    oversizedResponse: (typeUrl) => observers.forEach((o) => o.oversizedResponse?.(typeUrl)),
  };
}
