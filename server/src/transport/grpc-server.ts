/**
 * Serves AggregatedDiscoveryService (SotW and delta) and CSDS on the xDS
 * port, and hands each ADS stream to the push pipeline. Responses arrive pre-encoded, so the
 * response serializer is the identity.
 */
import * as grpc from '@grpc/grpc-js';
import type { PushPipeline } from '../sessions/push-pipeline.js';
import type { StreamHandle, StreamSink } from '../sessions/stream-sink.js';
import type { LoadController } from '../sessions/load-controller.js';
import { csdsHandlers, csdsServiceDefinition } from './csds-service.js';
import { guardCsds } from './csds-access.js';
import { ReadAccess, type ReadGrant } from './read-access.js';
import { readableResources } from './readable-resources.js';
import type { ResourceTypes } from '../resources/resource-type.js';
import { lrsHandlers, lrsServiceDefinition, type ClusterNameFor } from './lrs-service.js';
import {
  decodeDeltaDiscoveryRequest,
  decodeDiscoveryRequest,
  type DeltaDiscoveryRequest,
  type DiscoveryRequest,
} from '../wire/request.js';
import { nodeIdRefusal, spiffeIds } from './node-identity.js';
import { isUnreadable, readableRequest, type Unreadable } from './unreadable-frames.js';
import {
  defaultXdsLimits,
  StreamAccount,
  SubscriptionBudget,
  type CountedRequest,
  type LimitName,
} from './subscription-budget.js';
import v8 from 'node:v8';

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
    requestDeserialize: readableRequest(decodeDiscoveryRequest, 'envoy.service.discovery.v3.DiscoveryRequest'),
    responseSerialize: (bytes: Buffer): Buffer => bytes,
    responseDeserialize: (bytes: Buffer): Buffer => bytes,
    originalName: 'streamAggregatedResources',
  },
  DeltaAggregatedResources: {
    path: '/envoy.service.discovery.v3.AggregatedDiscoveryService/DeltaAggregatedResources',
    requestStream: true,
    responseStream: true,
    requestSerialize: () => Buffer.alloc(0),
    requestDeserialize: readableRequest(
      decodeDeltaDiscoveryRequest,
      'envoy.service.discovery.v3.DeltaDiscoveryRequest',
    ),
    responseSerialize: (bytes: Buffer): Buffer => bytes,
    responseDeserialize: (bytes: Buffer): Buffer => bytes,
    originalName: 'deltaAggregatedResources',
  },
};

export interface GrpcTransport {
  readonly port: number;
  /** Stops accepting, ends streams, waits up to `graceMs`, then forces. */
  stop(graceMs: number): Promise<void>;
  /** Calls open on each worker thread (xds-workers.ts); absent when the main thread serves. */
  threads?(): readonly number[];
}

/** What the xDS port serves with, on one thread or from workers (xds-workers.ts). */
export interface TransportOptions {
  readonly ads: PushPipeline;
  readonly tls?: TransportTls;
  readonly host: string;
  readonly port: number;
  /** What clients may make the server hold (default: derived from the heap limit). */
  readonly budget?: SubscriptionBudget;
  /** A stream refused for a limit (metrics). */
  readonly refused?: (limit: LimitName) => void;
  /** The resource types, to narrow to what each client may read (with `access`). */
  readonly resources?: ResourceTypes;
  /** Read rules by SPIFFE ID (mTLS); without them every client reads everything. */
  readonly access?: ReadAccess;
  /** Who may call CSDS besides identities with `csds: true`. */
  readonly csds?: { readonly adminToken?: string; readonly openReads?: boolean };
  /** Load reports (LRS) for load-aware services. */
  readonly load?: LoadController;
  /** The name a client knows a service's cluster by, for the LRS answer (default: the service's). */
  readonly loadClusterName?: ClusterNameFor;
}

/** The xDS port's services and the server's options: one grpc-js server's, or each worker's. */
export interface XdsServices {
  readonly services: readonly [grpc.ServiceDefinition, grpc.UntypedServiceImplementation][];
  readonly serverOptions: grpc.ChannelOptions;
}

/** The services' definitions without handlers (a worker builds its own: they hold functions). */
export function xdsServiceDefinitions(withLoad: boolean): grpc.ServiceDefinition[] {
  return [csdsServiceDefinition(), ...(withLoad ? [lrsServiceDefinition()] : []), ADS_SERVICE];
}

export function xdsServices(opts: TransportOptions): XdsServices {
  const budget =
    opts.budget ?? new SubscriptionBudget(defaultXdsLimits(v8.getHeapStatistics().heap_size_limit), () => true);
  const access = opts.access ?? new ReadAccess();
  const mtls = opts.tls?.clientCa !== undefined;
  const edge: Edge = { mtls, budget, refused: opts.refused ?? (() => {}), access };
  const serverOptions: grpc.ChannelOptions = {
    'grpc.keepalive_time_ms': 30_000,
    'grpc.keepalive_timeout_ms': 10_000,
    'grpc.keepalive_permit_without_calls': 1,
    'grpc.http2.min_ping_interval_without_data_ms': 5_000,
    'grpc.max_receive_message_length': 16 * 1024 * 1024,
    // Canopy serves no channelz; its per-connection and per-call tracking costs every stream's start.
    'grpc.enable_channelz': 0,
    // A backstop above the limit counted per connection, so that one is what clients normally meet (with its message).
    'grpc.max_concurrent_streams': budget.limits.maxStreamsPerConnection * 2 + 16,
  };
  const csds = guardCsds(
    csdsHandlers(() => opts.ads.clients(Infinity)),
    {
      ...opts.csds,
      identityAllowed: (call) =>
        mtls && access.grant(spiffeIds(call.getAuthContext()?.sslPeerCertificate?.subjectaltname)).csds,
    },
  );
  const view = (grant: ReadGrant): ResourceTypes | undefined =>
    opts.resources && !grant.all ? readableResources(opts.resources, grant) : undefined;
  const ads: grpc.UntypedServiceImplementation = {
    StreamAggregatedResources: (call: grpc.ServerDuplexStream<DiscoveryRequest | Unreadable, Buffer>) =>
      serveStream(call, edge, sotwCounted, (sink, grant) => opts.ads.open(call.getPeer(), sink, view(grant))),
    DeltaAggregatedResources: (call: grpc.ServerDuplexStream<DeltaDiscoveryRequest | Unreadable, Buffer>) =>
      serveStream(call, edge, deltaCounted, (sink, grant) => opts.ads.openDelta(call.getPeer(), sink, view(grant))),
  };
  const [csdsDef, ...rest] = xdsServiceDefinitions(opts.load !== undefined);
  const services: [grpc.ServiceDefinition, grpc.UntypedServiceImplementation][] = [[csdsDef!, csds]];
  if (opts.load) services.push([rest[0]!, lrsHandlers(opts.load, opts.loadClusterName)]);
  services.push([ADS_SERVICE, ads]);
  return { services, serverOptions };
}

export async function startGrpcTransport(opts: TransportOptions): Promise<GrpcTransport> {
  const { services, serverOptions } = xdsServices(opts);
  const server = new grpc.Server(serverOptions);
  for (const [definition, handlers] of services) server.addService(definition, handlers);
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

export function serverCredentials(tls: TransportTls | undefined): grpc.ServerCredentials {
  if (!tls) return grpc.ServerCredentials.createInsecure();
  return grpc.ServerCredentials.createSsl(
    tls.clientCa ?? null,
    [{ cert_chain: tls.cert, private_key: tls.key }],
    tls.clientCa !== undefined,
  );
}

/** What every stream's handler checks before a request reaches the pipeline. */
interface Edge {
  readonly mtls: boolean;
  readonly budget: SubscriptionBudget;
  readonly refused: (limit: LimitName) => void;
  readonly access: ReadAccess;
}

const sotwCounted = (r: DiscoveryRequest): CountedRequest => ({
  kind: 'sotw',
  typeUrl: r.typeUrl,
  names: r.resourceNames,
});
const deltaCounted = (r: DeltaDiscoveryRequest): CountedRequest => ({
  kind: 'delta',
  typeUrl: r.typeUrl,
  subscribe: r.subscribe,
  unsubscribe: r.unsubscribe,
  initialVersions: r.initialVersions,
});

function serveStream<R extends { readonly node?: { readonly id: string } }>(
  call: grpc.ServerDuplexStream<R | Unreadable, Buffer>,
  edge: Edge,
  counted: (req: R) => CountedRequest,
  open: (sink: StreamSink, grant: ReadGrant) => StreamHandle<R>,
): void {
  const account = edge.budget.openStream(call.getPeer());
  if (!(account instanceof StreamAccount)) {
    edge.refused(account.limit);
    call.on('error', () => {});
    call.emit('error', { code: grpc.status.RESOURCE_EXHAUSTED, details: account.detail });
    return;
  }
  // With mTLS every request's node id must be one the client certificate names, and the identity says what it reads.
  const identities = edge.mtls ? spiffeIds(call.getAuthContext()?.sslPeerCertificate?.subjectaltname) : undefined;
  if (identities?.length === 0) {
    account.close();
    call.on('error', () => {});
    call.emit('error', {
      code: grpc.status.PERMISSION_DENIED,
      details: 'the client certificate has no spiffe:// URI SAN: mTLS clients are identified by their SPIFFE ID',
    });
    return;
  }
  const grant = edge.access.grant(identities ?? []);
  let ended = false;
  const handle = open(
    {
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
    },
    grant,
  );
  /** Ends the stream with a status, after the responses already handed to grpc-js. */
  const refuse = (code: grpc.status, details: string): void => {
    ended = true;
    handle.closed();
    account.close();
    call.emit('error', { code, details });
  };
  call.on('data', (req: R | Unreadable) => {
    if (ended) return;
    if (isUnreadable(req)) return refuse(grpc.status.INVALID_ARGUMENT, req.unreadable);
    const refusal = identities && req.node ? nodeIdRefusal(identities, req.node.id) : undefined;
    if (refusal !== undefined) return refuse(grpc.status.PERMISSION_DENIED, refusal);
    const over = account.admit(counted(req));
    if (over) {
      edge.refused(over.limit);
      return refuse(grpc.status.RESOURCE_EXHAUSTED, over.detail);
    }
    handle.receive(req);
  });
  const close = (): void => {
    ended = true;
    handle.closed();
    account.close();
  };
  call.on('end', () => {
    close();
    call.end();
  });
  call.on('cancelled', close);
  call.on('error', close);
  call.on('close', close);
}

export function hostPort(host: string, port: number): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}
