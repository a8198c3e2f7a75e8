/**
 * gRPC over bare HTTP/2 (node:http2), for tests that must control the bytes
 * on the wire: the 5-byte message framing, the compressed flag, several
 * messages in one write. Requests are encoded with protobufjs from Envoy's
 * protos as shipped by @grpc/grpc-js-xds (nothing shared with the server).
 */
import { existsSync } from 'node:fs';
import http2 from 'node:http2';
import { createRequire } from 'node:module';
import path from 'node:path';
import protobuf from 'protobufjs';

const xdsDir = path.dirname(createRequire(import.meta.url).resolve('@grpc/grpc-js-xds/package.json'));
const pbjsDir = path.dirname(createRequire(import.meta.url).resolve('protobufjs/package.json'));
// protobufjs ships google/protobuf/*.proto itself.
const includeDirs = [
  ...['envoy-api', 'xds', 'googleapis', 'protoc-gen-validate'].map((d) => path.join(xdsDir, 'deps', d)),
  pbjsDir,
];

let root: protobuf.Root | undefined;

function envoyTypes(): protobuf.Root {
  if (!root) {
    root = new protobuf.Root();
    root.resolvePath = (_origin, target) => includeDirs.map((d) => path.join(d, target)).find(existsSync) ?? target;
    root.loadSync(
      [
        'envoy/service/discovery/v3/discovery.proto',
        'envoy/service/status/v3/csds.proto',
        'envoy/config/endpoint/v3/endpoint.proto',
      ],
      { keepCase: true },
    );
  }
  return root;
}

/** Encodes an Envoy message (e.g. `envoy.service.discovery.v3.DiscoveryRequest`) from a snake_case object. */
export function encodeEnvoy(typeName: string, value: object): Buffer {
  const type = envoyTypes().lookupType(typeName);
  return Buffer.from(type.encode(type.fromObject(value)).finish());
}

/** Decodes an Envoy message (e.g. `envoy.config.endpoint.v3.ClusterLoadAssignment`) to a snake_case object. */
export function decodeEnvoy<T = Record<string, unknown>>(typeName: string, bytes: Uint8Array): T {
  const type = envoyTypes().lookupType(typeName);
  return type.toObject(type.decode(bytes), { defaults: true, enums: String }) as T;
}

/** One gRPC length-prefixed message: flag byte (1 = compressed), 4-byte big-endian length, bytes. */
export function grpcFrame(message: Buffer, compressed = false): Buffer {
  const head = Buffer.alloc(5);
  head[0] = compressed ? 1 : 0;
  head.writeUInt32BE(message.length, 1);
  return Buffer.concat([head, message]);
}

/** What a raw gRPC call received: message bytes, and the status once it ended. */
export interface RawCall {
  readonly messages: Buffer[];
  /** Resolves with grpc-status and grpc-message from the trailers (or a trailers-only response), or 'reset'. */
  readonly status: Promise<{ code: number; message: string } | 'reset'>;
  write(bytes: Buffer): void;
  close(): void;
}

/** Opens one gRPC call on a fresh HTTP/2 connection to `address` (host:port, plaintext). */
export function openRawCall(address: string, method: string, headers: http2.OutgoingHttpHeaders = {}): RawCall {
  const session = http2.connect(`http://${address}`);
  session.on('error', () => {});
  const stream = session.request({
    ':method': 'POST',
    ':path': method,
    'content-type': 'application/grpc',
    te: 'trailers',
    ...headers,
  });
  const messages: Buffer[] = [];
  let pending = Buffer.alloc(0);
  stream.on('data', (chunk: Buffer) => {
    pending = Buffer.concat([pending, chunk]);
    while (pending.length >= 5 && pending.length >= 5 + pending.readUInt32BE(1)) {
      const len = pending.readUInt32BE(1);
      messages.push(pending.subarray(5, 5 + len));
      pending = pending.subarray(5 + len);
    }
  });
  const status = new Promise<{ code: number; message: string } | 'reset'>((resolve) => {
    const fromHeaders = (h: http2.IncomingHttpHeaders): void => {
      const code = h['grpc-status'];
      if (code !== undefined)
        resolve({ code: Number(code), message: decodeURIComponent(String(h['grpc-message'] ?? '')) });
    };
    stream.on('response', fromHeaders);
    stream.on('trailers', fromHeaders);
    stream.on('close', () => resolve('reset'));
    stream.on('error', () => resolve('reset'));
  });
  return {
    messages,
    status,
    write: (bytes) => stream.write(bytes),
    close: () => {
      stream.close();
      session.close();
    },
  };
}
