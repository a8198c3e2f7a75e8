/**
 * Envoy's protos, loaded once with protobufjs from the @grpc/grpc-js-xds
 * package (its deps/ folder), never copied into this repository.
 */
import { accessSync, constants } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import protobuf from 'protobufjs';

const FILES = [
  'envoy/service/discovery/v3/ads.proto',
  'envoy/config/listener/v3/listener.proto',
  'envoy/config/route/v3/route.proto',
  'envoy/config/cluster/v3/cluster.proto',
  'envoy/config/endpoint/v3/endpoint.proto',
  'envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager.proto',
  'envoy/extensions/filters/http/router/v3/router.proto',
  // What Envoy sidecars are sent inside Anys.
  'envoy/extensions/filters/network/tcp_proxy/v3/tcp_proxy.proto',
  'envoy/extensions/upstreams/http/v3/http_protocol_options.proto',
  'envoy/service/status/v3/csds.proto',
];

let root: protobuf.Root | undefined;

export function includeDirs(): string[] {
  const require = createRequire(import.meta.url);
  const xds = path.dirname(require.resolve('@grpc/grpc-js-xds/package.json'));
  const pbjs = path.dirname(require.resolve('protobufjs/package.json'));
  return [...['envoy-api', 'xds', 'googleapis', 'protoc-gen-validate'].map((d) => path.join(xds, 'deps', d)), pbjs];
}

export function envoyRoot(): protobuf.Root {
  root ??= loadEnvoyProtos(FILES);
  return root;
}

/** A new root holding these proto files (paths under Envoy's API tree) and what they import. */
export function loadEnvoyProtos(files: readonly string[]): protobuf.Root {
  const dirs = includeDirs();
  const r = new protobuf.Root();
  const fallback = r.resolvePath.bind(r);
  r.resolvePath = (origin, target) => {
    if (path.isAbsolute(target)) return target;
    for (const dir of dirs) {
      const full = path.join(dir, target);
      try {
        accessSync(full, constants.R_OK);
        return full;
      } catch {
        // not in this include dir
      }
    }
    return fallback(origin, target);
  };
  r.loadSync([...files], { keepCase: true });
  r.resolveAll();
  return r;
}

export function messageType(fullName: string): protobuf.Type {
  return envoyRoot().lookupType(fullName);
}

/** One message encoded through protobufjs from its proto-named fields (for resources off the hot path). */
export function encodeMessage(fullName: string, value: object): Uint8Array {
  const type = messageType(fullName);
  return type.encode(type.fromObject(value)).finish();
}
