/**
 * envoy.service.status.v3.ClientStatusDiscoveryService on the xDS port:
 * FetchClientStatus answers once; StreamClientStatus answers each request on
 * the stream. Messages go through protobufjs with Envoy's csds.proto (not a
 * hot path); the content comes from sessions/csds.ts.
 */
import * as grpc from '@grpc/grpc-js';
import type { ClientStatus } from '../sessions/client-status.js';
import { clientStatusResponse, type ClientStatusRequest } from '../sessions/csds.js';
import { messageType } from '../wire/protos.js';

const PREFIX = '/envoy.service.status.v3.ClientStatusDiscoveryService/';

function codec() {
  const request = messageType('envoy.service.status.v3.ClientStatusRequest');
  const response = messageType('envoy.service.status.v3.ClientStatusResponse');
  return {
    requestSerialize: () => Buffer.alloc(0),
    requestDeserialize: (bytes: Buffer): ClientStatusRequest =>
      request.toObject(request.decode(bytes), { enums: String, longs: Number }) as ClientStatusRequest,
    responseSerialize: (value: object): Buffer => Buffer.from(response.encode(response.fromObject(value)).finish()),
    responseDeserialize: (bytes: Buffer): Buffer => bytes,
  };
}

export function csdsServiceDefinition(): grpc.ServiceDefinition {
  const c = codec();
  return {
    StreamClientStatus: {
      path: `${PREFIX}StreamClientStatus`,
      requestStream: true,
      responseStream: true,
      ...c,
      originalName: 'streamClientStatus',
    },
    FetchClientStatus: {
      path: `${PREFIX}FetchClientStatus`,
      requestStream: false,
      responseStream: false,
      ...c,
      originalName: 'fetchClientStatus',
    },
  };
}

export function csdsHandlers(clients: () => readonly ClientStatus[]): grpc.UntypedServiceImplementation {
  return {
    FetchClientStatus: (
      call: grpc.ServerUnaryCall<ClientStatusRequest, object>,
      callback: grpc.sendUnaryData<object>,
    ) => callback(null, clientStatusResponse(clients(), call.request)),
    StreamClientStatus: (call: grpc.ServerDuplexStream<ClientStatusRequest, object>) => {
      call.on('data', (req: ClientStatusRequest) => call.write(clientStatusResponse(clients(), req)));
      call.on('end', () => call.end());
      call.on('error', () => {});
    },
  };
}
