/**
 * An ADS client that stops reading, for backpressure tests: plain node:http2
 * with gRPC's framing, its stream paused so that HTTP/2 flow control holds the
 * server back once the window is full. (A grpc-js client keeps reading into
 * its own memory whether or not the application reads, so it cannot stall.)
 */
import http2 from 'node:http2';
import { messageType } from '../../server/src/wire/protos.js';

export interface StalledResponse {
  readonly version_info: string;
  readonly nonce: string;
  readonly resources: readonly unknown[];
}

export class StalledAdsClient {
  private readonly session: http2.ClientHttp2Session;
  private readonly stream: http2.ClientHttp2Stream;
  private readonly request = messageType('envoy.service.discovery.v3.DiscoveryRequest');
  private readonly response = messageType('envoy.service.discovery.v3.DiscoveryResponse');
  private buffered = Buffer.alloc(0);
  readonly received: StalledResponse[] = [];

  constructor(address: string) {
    this.session = http2.connect(`http://${address}`);
    this.session.on('error', () => {});
    this.stream = this.session.request({
      ':method': 'POST',
      ':path': '/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources',
      'content-type': 'application/grpc',
      te: 'trailers',
    });
    this.stream.on('error', () => {});
    this.stream.pause();
  }

  /** Sends one DiscoveryRequest (proto field names); resolves once it is handed to the socket. */
  send(req: object): Promise<void> {
    const body = this.request.encode(this.request.fromObject(req)).finish();
    const frame = Buffer.alloc(5 + body.length);
    frame.writeUInt32BE(body.length, 1);
    frame.set(body, 5);
    return new Promise((resolve) => this.stream.write(frame, () => resolve()));
  }

  /** Starts reading: every whole response that arrives is decoded into `received`. */
  resume(): void {
    this.stream.on('data', (chunk: Buffer) => {
      this.buffered = Buffer.concat([this.buffered, chunk]);
      while (this.buffered.length >= 5) {
        const n = this.buffered.readUInt32BE(1);
        if (this.buffered.length < 5 + n) break;
        const msg = this.response.decode(this.buffered.subarray(5, 5 + n));
        this.received.push(this.response.toObject(msg, { arrays: true }) as StalledResponse);
        this.buffered = this.buffered.subarray(5 + n);
      }
    });
    this.stream.resume();
  }

  close(): void {
    this.stream.close();
    this.session.close();
  }
}
