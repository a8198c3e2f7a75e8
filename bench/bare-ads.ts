/**
 * The bare grpc-js ADS services the baselines run: requests decoded as Canopy
 * decodes them, responses written as the pre-encoded bytes they are. What a
 * baseline does with each stream is its own.
 */
import * as grpc from '@grpc/grpc-js';
import {
  decodeDeltaDiscoveryRequest,
  decodeDiscoveryRequest,
  type DeltaDiscoveryRequest,
  type DiscoveryRequest,
} from '../server/src/wire/request.js';
import { DEFAULT_HEAP_GROWTH_PERCENT, setHeapGrowth } from '../server/src/platform/heap-growth.js';
import { DELTA_ADS_PATH } from './delta-wire.js';

/** The heap growth `canopy serve` runs with (CANOPY_HEAP_GROWTH, which the bench sets for both sides): the same GC. */
export function serveHeapGrowth(): void {
  setHeapGrowth(Number(process.env['CANOPY_HEAP_GROWTH'] ?? DEFAULT_HEAP_GROWTH_PERCENT));
}

export const ADS_PATH = '/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources';

function bidi<R>(path: string, decode: (b: Buffer) => R): grpc.MethodDefinition<R, Buffer> {
  return {
    path,
    requestStream: true,
    responseStream: true,
    requestSerialize: () => Buffer.alloc(0),
    requestDeserialize: decode,
    responseSerialize: (b: Buffer) => b,
    responseDeserialize: (b: Buffer) => b,
  };
}

const options = { 'grpc.max_receive_message_length': 16 * 1024 * 1024 };

/** A grpc-js server serving StreamAggregatedResources with `handler`. */
export function bareAdsServer(handler: (call: grpc.ServerDuplexStream<DiscoveryRequest, Buffer>) => void): grpc.Server {
  const server = new grpc.Server(options);
  server.addService(
    { StreamAggregatedResources: bidi(ADS_PATH, decodeDiscoveryRequest) },
    { StreamAggregatedResources: handler },
  );
  return server;
}

/** A grpc-js server serving DeltaAggregatedResources with `handler`. */
export function bareDeltaAdsServer(
  handler: (call: grpc.ServerDuplexStream<DeltaDiscoveryRequest, Buffer>) => void,
): grpc.Server {
  const server = new grpc.Server(options);
  server.addService(
    { DeltaAggregatedResources: bidi(DELTA_ADS_PATH, decodeDeltaDiscoveryRequest) },
    { DeltaAggregatedResources: handler },
  );
  return server;
}
