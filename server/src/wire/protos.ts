/**
 * Envoy's protos, loaded once with protobufjs from the @grpc/grpc-js-xds
 * package (its deps/ folder), never copied into this repository.
 *
 * Parsing the .proto files costs about 0.2 s of startup, so the build
 * (`npm run build`, server/build-descriptor.mjs) also writes the parsed root
 * as a JSON descriptor beside this module in dist/, which loads in about half
 * that. The descriptor names what it was made from (these files, the package
 * versions); when it is missing or was made from something else, the .proto
 * files are parsed as before.
 */
import { accessSync, constants, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import protobuf from 'protobufjs';

export const ENVOY_FILES = [
  'envoy/service/discovery/v3/ads.proto',
  'envoy/config/listener/v3/listener.proto',
  'envoy/config/route/v3/route.proto',
  'envoy/config/cluster/v3/cluster.proto',
  'envoy/config/endpoint/v3/endpoint.proto',
  'envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager.proto',
  'envoy/extensions/filters/http/router/v3/router.proto',
  // What Envoy sidecars are sent inside Anys.
  'envoy/extensions/filters/network/tcp_proxy/v3/tcp_proxy.proto',
  'envoy/extensions/filters/http/on_demand/v3/on_demand.proto',
  'envoy/extensions/upstreams/http/v3/http_protocol_options.proto',
  'envoy/service/status/v3/csds.proto',
  'envoy/service/load_stats/v3/lrs.proto',
];

let root: protobuf.Root | undefined;

export function includeDirs(): string[] {
  const require = createRequire(import.meta.url);
  const xds = path.dirname(require.resolve('@grpc/grpc-js-xds/package.json'));
  const pbjs = path.dirname(require.resolve('protobufjs/package.json'));
  return [...['envoy-api', 'xds', 'googleapis', 'protoc-gen-validate'].map((d) => path.join(xds, 'deps', d)), pbjs];
}

export function envoyRoot(): protobuf.Root {
  root ??= loadEnvoyDescriptor() ?? loadEnvoyProtos(ENVOY_FILES);
  return root;
}

const DESCRIPTOR = new URL('./envoy-descriptor.json', import.meta.url);

interface Descriptor {
  readonly source: string;
  readonly root: protobuf.INamespace;
}

/** What a descriptor must have been made from to stand for ENVOY_FILES here. */
function descriptorSource(): string {
  const require = createRequire(import.meta.url);
  const version = (pkg: string) => (require(`${pkg}/package.json`) as { version: string }).version;
  return JSON.stringify({ files: ENVOY_FILES, xds: version('@grpc/grpc-js-xds'), protobufjs: version('protobufjs') });
}

/** The root from the built descriptor; undefined when it is missing or stale. */
export function loadEnvoyDescriptor(): protobuf.Root | undefined {
  let descriptor: Descriptor;
  try {
    descriptor = JSON.parse(readFileSync(DESCRIPTOR, 'utf8')) as Descriptor;
  } catch {
    return undefined; // not built (running from source, or a build without the step)
  }
  if (descriptor.source !== descriptorSource()) return undefined;
  const r = protobuf.Root.fromJSON(descriptor.root);
  r.resolveAll();
  return r;
}

/** Parses the .proto files and writes the descriptor envoyRoot() then loads (a build step). */
export function writeEnvoyDescriptor(): string {
  const descriptor: Descriptor = { source: descriptorSource(), root: loadEnvoyProtos(ENVOY_FILES).toJSON() };
  writeFileSync(DESCRIPTOR, JSON.stringify(descriptor));
  return DESCRIPTOR.pathname;
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
