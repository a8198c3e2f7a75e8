/**
 * The bare grpc-js ADS service the baselines run: requests decoded as Canopy
 * decodes them, responses written as the pre-encoded bytes they are. What a
 * baseline does with each stream is its own.
 */
import * as grpc from '@grpc/grpc-js';
import { decodeDiscoveryRequest, type DiscoveryRequest } from '../server/src/wire/request.js';

export const ADS_PATH = '/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources';

/** A grpc-js server serving StreamAggregatedResources with `handler`. */
export function bareAdsServer(handler: (call: grpc.ServerDuplexStream<DiscoveryRequest, Buffer>) => void): grpc.Server {
  const server = new grpc.Server({ 'grpc.max_receive_message_length': 16 * 1024 * 1024 });
  server.addService(
    {
      StreamAggregatedResources: {
        path: ADS_PATH,
        requestStream: true,
        responseStream: true,
        requestSerialize: () => Buffer.alloc(0),
        requestDeserialize: (b: Buffer) => decodeDiscoveryRequest(b),
        responseSerialize: (b: Buffer) => b,
        responseDeserialize: (b: Buffer) => b,
      },
    },
    { StreamAggregatedResources: handler },
  );
  return server;
}
