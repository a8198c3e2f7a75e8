/**
 * Envoy's protos as a test peer sees them: loaded with protobufjs from the
 * @grpc/grpc-js-xds package (its deps/ folder), in a root of their own, so the
 * checks share nothing with the server's encoder. Includes the types an Envoy
 * sidecar or bootstrap carries inside `Any`s (tcp_proxy, HTTP protocol
 * options, the Bootstrap itself).
 */
import type protobuf from 'protobufjs';
import { loadEnvoyProtos } from '../../src/wire/protos.js';

const FILES = [
  'envoy/service/discovery/v3/ads.proto',
  'envoy/config/bootstrap/v3/bootstrap.proto',
  'envoy/config/listener/v3/listener.proto',
  'envoy/config/route/v3/route.proto',
  'envoy/config/cluster/v3/cluster.proto',
  'envoy/config/endpoint/v3/endpoint.proto',
  'envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager.proto',
  'envoy/extensions/filters/network/tcp_proxy/v3/tcp_proxy.proto',
  'envoy/extensions/filters/http/router/v3/router.proto',
  'envoy/extensions/upstreams/http/v3/http_protocol_options.proto',
  'envoy/extensions/load_balancing_policies/round_robin/v3/round_robin.proto',
  'envoy/extensions/load_balancing_policies/wrr_locality/v3/wrr_locality.proto',
];

let root: protobuf.Root | undefined;

export function envoyProtos(): protobuf.Root {
  root ??= loadEnvoyProtos(FILES);
  return root;
}

export function envoyType(fullName: string): protobuf.Type {
  return envoyProtos().lookupType(fullName);
}

/** The message type an Any's type URL names, or undefined when it is not loaded. */
export function anyType(typeUrl: string): protobuf.Type | undefined {
  const name = typeUrl.slice(typeUrl.lastIndexOf('/') + 1);
  try {
    return envoyProtos().lookupType(name);
  } catch {
    return undefined;
  }
}
