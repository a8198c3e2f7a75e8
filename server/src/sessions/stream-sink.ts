/**
 * The contract between the push pipeline and the transport that carries its
 * streams (transport/grpc-server.ts): what the pipeline writes a stream
 * through, what it hands back for the stream's requests, and the log it
 * reports through.
 */
import type { DiscoveryRequest } from '../wire/request.js';

/** What the transport gives the pipeline for one stream. */
export interface StreamSink {
  /** Hands one response to the transport; `flushed` is called once it has left the transport's queue. */
  write(bytes: Buffer, flushed: () => void): void;
  end(): void;
  /** Ends the stream with an error status (INVALID_ARGUMENT) carrying `detail`. */
  reject(detail: string): void;
}

export interface StreamHandle<Request = DiscoveryRequest> {
  receive(req: Request): void;
  closed(): void;
}

/** The subset of pino the pipeline logs through. */
export interface XdsLog {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  debug(obj: object, msg: string): void;
}
