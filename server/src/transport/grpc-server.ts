/**
 * Serves AggregatedDiscoveryService (SotW and delta) and CSDS on the xDS
 * port, and hands each ADS stream to the push pipeline. Responses arrive pre-encoded, so the
 * response serializer is the identity.
 */
import * as grpc from '@grpc/grpc-js';
import type { PushPipeline, StreamHandle, StreamSink } from '../sessions/push-pipeline.js';
import type { LoadController } from '../sessions/load-controller.js';
import { csdsHandlers, csdsServiceDefinition } from './csds-service.js';
import { lrsHandlers, lrsServiceDefinition } from './lrs-service.js';
import {
  decodeDeltaDiscoveryRequest,
  decodeDiscoveryRequest,
  type DeltaDiscoveryRequest,
  type DiscoveryRequest,
} from '../wire/request.js';
import { nodeIdRefusal, spiffeIds } from './node-identity.js';

/** PEM key material; with clientCa, clients must present a certificate it signed (mTLS). */
export interface TransportTls {
  readonly cert: Buffer;
  readonly key: Buffer;
  readonly clientCa?: Buffer;
}

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
  readonly tls?: TransportTls;
  readonly host: string;
  readonly port: number;
  /** Load reports (LRS) for load-aware services. */
  readonly load?: LoadController;
}): Promise<GrpcTransport> {
  const server = new grpc.Server({
    'grpc.keepalive_time_ms': 30_000,
    'grpc.keepalive_timeout_ms': 10_000,
    'grpc.keepalive_permit_without_calls': 1,
    'grpc.http2.min_ping_interval_without_data_ms': 5_000,
    'grpc.max_receive_message_length': 16 * 1024 * 1024,
  });
  const mtls = opts.tls?.clientCa !== undefined;
  server.addService(
    csdsServiceDefinition(),
    csdsHandlers(() => opts.ads.clients(Infinity)),
  );
  if (opts.load) server.addService(lrsServiceDefinition(), lrsHandlers(opts.load));
  server.addService(ADS_SERVICE, {
    StreamAggregatedResources: (call: grpc.ServerDuplexStream<DiscoveryRequest, Buffer>) =>
      serveStream(call, mtls, (sink) => opts.ads.open(call.getPeer(), sink)),
    DeltaAggregatedResources: (call: grpc.ServerDuplexStream<DeltaDiscoveryRequest, Buffer>) =>
      serveStream(call, mtls, (sink) => opts.ads.openDelta(call.getPeer(), sink)),
  });
  const port = await new Promise<number>((resolve, reject) => {
    server.bindAsync(hostPort(opts.host, opts.port), serverCredentials(opts.tls), (err, bound) =>
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

function serverCredentials(tls: TransportTls | undefined): grpc.ServerCredentials {
  if (!tls) return grpc.ServerCredentials.createInsecure();
  return grpc.ServerCredentials.createSsl(
    tls.clientCa ?? null,
    [{ cert_chain: tls.cert, private_key: tls.key }],
    tls.clientCa !== undefined,
  );
}

function serveStream<R extends { readonly node?: { readonly id: string } }>(
  call: grpc.ServerDuplexStream<R, Buffer>,
  mtls: boolean,
  open: (sink: StreamSink) => StreamHandle<R>,
): void {
  // With mTLS every request's node id must be one the client certificate names.
  const identities = mtls ? spiffeIds(call.getAuthContext()?.sslPeerCertificate?.subjectaltname) : undefined;
  let ended = false;
  const handle = open({
    // The callback runs once grpc-js has handed the message on (the client's flow control lets it):
    // the pipeline writes nothing more to this stream until then.
    write: (bytes, flushed) => {
      if (ended) return;
      call.write(bytes, () => flushed());
    },
    end: () => {
      if (ended) return;
      ended = true;
      call.end();
    },
    reject: (detail) => {
      if (ended) return;
      ended = true;
      call.emit('error', { code: grpc.status.INVALID_ARGUMENT, details: detail });
    },
  });
  call.on('data', (req: R) => {
    const refusal = identities && req.node ? nodeIdRefusal(identities, req.node.id) : undefined;
    if (refusal === undefined) return handle.receive(req);
    ended = true;
    handle.closed();
    call.emit('error', { code: grpc.status.PERMISSION_DENIED, details: refusal });
  });
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
