/**
 * A raw ADS client for protocol tests: @grpc/grpc-js with Envoy's ads.proto
 * loaded by @grpc/proto-loader, so responses are decoded by a path that
 * shares nothing with the server's hand-written encoder.
 */
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { createRequire } from 'node:module';
import path from 'node:path';

const xdsDir = path.dirname(createRequire(import.meta.url).resolve('@grpc/grpc-js-xds/package.json'));
const includeDirs = ['envoy-api', 'xds', 'googleapis', 'protoc-gen-validate'].map((d) => path.join(xdsDir, 'deps', d));

export interface RawResponse {
  version_info: string;
  type_url: string;
  nonce: string;
  resources: { type_url: string; value: Buffer }[];
}

export interface RawRequest {
  version_info?: string;
  node?: object;
  resource_names?: string[];
  type_url: string;
  response_nonce?: string;
  error_detail?: { code: number; message: string };
}

let ctor: grpc.ServiceClientConstructor | undefined;

function adsClientCtor(): grpc.ServiceClientConstructor {
  if (ctor) return ctor;
  const def = protoLoader.loadSync('envoy/service/discovery/v3/ads.proto', {
    includeDirs,
    keepCase: true,
    longs: String,
    enums: String,
    defaults: true,
    oneofs: true,
  });
  const pkg = grpc.loadPackageDefinition(def) as unknown as {
    envoy: { service: { discovery: { v3: { AggregatedDiscoveryService: grpc.ServiceClientConstructor } } } };
  };
  ctor = pkg.envoy.service.discovery.v3.AggregatedDiscoveryService;
  return ctor;
}

/** A DeltaDiscoveryResponse as proto-loader decodes it. */
export interface RawDeltaResponse {
  system_version_info: string;
  type_url: string;
  nonce: string;
  resources: { name: string; version: string; resource: { type_url: string; value: Buffer } | null }[];
  removed_resources: string[];
}

export interface RawDeltaRequest {
  node?: object;
  type_url: string;
  resource_names_subscribe?: string[];
  resource_names_unsubscribe?: string[];
  initial_resource_versions?: Record<string, string>;
  response_nonce?: string;
  error_detail?: { code: number; message: string };
}

/** One ADS stream (SotW or delta) with a queue of what arrived and awaitable reads. */
class RawStream<Req, Res> {
  private readonly queue: Res[] = [];
  private waiters: ((r: Res) => void)[] = [];
  private readonly client: grpc.Client;
  private readonly call: grpc.ClientDuplexStream<Req, Res>;
  /** The status the stream ended with, once it ended with an error. */
  error: grpc.ServiceError | undefined;

  /** The call's final status, once the server ends the stream. */
  readonly status: Promise<grpc.StatusObject>;
  private reading = false;

  /** `stalled`: read nothing the server sends until `resume()` (a client that stopped reading). */
  constructor(
    address: string,
    methodName: string,
    options: grpc.ClientOptions = {},
    stalled = false,
    credentials: grpc.ChannelCredentials = grpc.credentials.createInsecure(),
  ) {
    const Ctor = adsClientCtor();
    this.client = new Ctor(address, credentials, options);
    const method = (this.client as unknown as Record<string, () => grpc.ClientDuplexStream<Req, Res>>)[methodName];
    this.call = method!.call(this.client);
    this.call.on('error', (err: grpc.ServiceError) => {
      this.error = err;
    });
    this.status = new Promise((resolve) => this.call.on('status', resolve));
    if (!stalled) this.resume();
  }

  /** Starts (or goes on) reading responses. */
  resume(): void {
    if (this.reading) return;
    this.reading = true;
    this.call.on('data', (r: Res) => {
      const w = this.waiters.shift();
      if (w) w(r);
      else this.queue.push(r);
    });
  }

  send(req: Req): void {
    this.call.write(req);
  }

  /** Writes and resolves once the request has been handed to the transport (for loops of many requests). */
  sendAndFlush(req: Req): Promise<void> {
    return new Promise((resolve) => this.call.write(req, () => resolve()));
  }

  next(timeoutMs = 3000): Promise<Res> {
    const queued = this.queue.shift();
    if (queued) return Promise.resolve(queued);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== waiter);
        reject(new Error(`no DiscoveryResponse within ${timeoutMs} ms`));
      }, timeoutMs);
      const waiter = (r: Res): void => {
        clearTimeout(timer);
        resolve(r);
      };
      this.waiters.push(waiter);
    });
  }

  /** Resolves with the response if one arrives within `ms`, else undefined. */
  async maybeNext(ms: number): Promise<Res | undefined> {
    try {
      return await this.next(ms);
    } catch {
      return undefined;
    }
  }

  close(): void {
    this.call.end();
    this.client.close();
  }
}

/** StreamAggregatedResources: the state-of-the-world protocol. */
export class RawAdsStream extends RawStream<RawRequest, RawResponse> {
  constructor(
    address: string,
    options: grpc.ClientOptions = {},
    stalled = false,
    credentials?: grpc.ChannelCredentials,
  ) {
    super(address, 'StreamAggregatedResources', options, stalled, credentials);
  }
}

/** DeltaAggregatedResources: the incremental protocol. */
export class RawDeltaStream extends RawStream<RawDeltaRequest, RawDeltaResponse> {
  constructor(address: string, options: grpc.ClientOptions = {}, credentials?: grpc.ChannelCredentials) {
    super(address, 'DeltaAggregatedResources', options, false, credentials);
  }
}
