/**
 * The only module that speaks gRPC: serves AggregatedDiscoveryService and
 * hands each stream to the ADS pipeline. Responses arrive pre-encoded, so the
 * response serializer is the identity.
 */
import * as grpc from '@grpc/grpc-js';
import type { PushPipeline, StreamHandle, StreamSink } from '../sessions/push-pipeline.js';
import {
  decodeDeltaDiscoveryRequest,
  decodeDiscoveryRequest,
  type DeltaDiscoveryRequest,
  type DiscoveryRequest,
} from '../wire/request.js';

const ADS_SERVICE: grpc.ServiceDefinition = {
  StreamAggregatedResources: {
    path: '/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources',
    requestStream: true,
    responseStream: true,
    requestSerialize: () => Buffer.alloc(0),
    requestDeserialize: (bytes: Buffer): DiscoveryRequest => decodeDiscoveryRequest(bytes),
    responseSerialize: (bytes: Buffer): Buffer => bytes,
    responseDeserialize: (bytes: Buffer): Buffer => bytes,
    originalName: 'streamAggregatedResources',
  },
  DeltaAggregatedResources: {
    path: '/envoy.service.discovery.v3.AggregatedDiscoveryService/DeltaAggregatedResources',
    requestStream: true,
    responseStream: true,
    requestSerialize: () => Buffer.alloc(0),
    requestDeserialize: (bytes: Buffer): DeltaDiscoveryRequest => decodeDeltaDiscoveryRequest(bytes),
    responseSerialize: (bytes: Buffer): Buffer => bytes,
    responseDeserialize: (bytes: Buffer): Buffer => bytes,
    originalName: 'deltaAggregatedResources',
  },
};

export interface GrpcTransport {
  readonly port: number;
  /** Stops accepting, ends streams, waits up to `graceMs`, then forces. */
  stop(graceMs: number): Promise<void>;
}

export async function startGrpcTransport(opts: {
  readonly ads: PushPipeline;
  readonly host: string;
  readonly port: number;
}): Promise<GrpcTransport> {
  const server = new grpc.Server({
    'grpc.keepalive_time_ms': 30_000,
    'grpc.keepalive_timeout_ms': 10_000,
    'grpc.keepalive_permit_without_calls': 1,
    'grpc.http2.min_ping_interval_without_data_ms': 5_000,
    'grpc.max_receive_message_length': 16 * 1024 * 1024,
  });
  server.addService(ADS_SERVICE, {
    StreamAggregatedResources: (call: grpc.ServerDuplexStream<DiscoveryRequest, Buffer>) =>
      serveStream(call, (sink) => opts.ads.open(call.getPeer(), sink)),
    DeltaAggregatedResources: (call: grpc.ServerDuplexStream<DeltaDiscoveryRequest, Buffer>) =>
      serveStream(call, (sink) => opts.ads.openDelta(call.getPeer(), sink)),
  });
  const port = await new Promise<number>((resolve, reject) => {
    server.bindAsync(hostPort(opts.host, opts.port), grpc.ServerCredentials.createInsecure(), (err, bound) =>
      err ? reject(err) : resolve(bound),
    );
  });
  return {
    port,
    stop: (graceMs) =>
      new Promise<void>((resolve) => {
        opts.ads.close();
        const force = setTimeout(() => {
          server.forceShutdown();
          resolve();
        }, graceMs);
        server.tryShutdown(() => {
          clearTimeout(force);
          resolve();
        });
      }),
  };
}

function serveStream<R>(call: grpc.ServerDuplexStream<R, Buffer>, open: (sink: StreamSink) => StreamHandle<R>): void {
  let ended = false;
  const handle = open({
    write: (bytes, flushed) => {
      if (ended) {
        flushed?.();
        return true;
      }
      // grpc-js calls back once the message is written to the HTTP/2 stream, flow control permitting.
      return flushed ? call.write(bytes, () => flushed()) : call.write(bytes);
    },
    end: () => {
      if (ended) return;
      ended = true;
      call.end();
    },
  });
  call.on('data', (req: R) => handle.receive(req));
  call.on('drain', () => handle.drained());
  const close = (): void => {
    ended = true;
    handle.closed();
  };
  call.on('end', () => {
    close();
    call.end();
  });
  call.on('cancelled', close);
  call.on('error', close);
  call.on('close', close);
}

function hostPort(host: string, port: number): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}
