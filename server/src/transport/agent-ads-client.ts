/**
 * The node agent's ADS client: one SotW stream for one resource type, kept
 * open with jittered exponential backoff. The agent hands it a handler that
 * loads each response and says whether it was applied; this client then
 * ACKs (the response's version) or NACKs (the last applied version, with the
 * handler's detail). The only gRPC the agent touches lives here.
 */
import * as grpc from '@grpc/grpc-js';
import { channelCredentials, type ClientTlsMaterial } from './client-credentials.js';
import { messageType } from '../wire/protos.js';

const ADS_METHOD = '/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources';

export interface AdsNode {
  readonly id: string;
  readonly cluster: string;
  readonly locality: { readonly region: string; readonly zone: string; readonly subzone: string };
  readonly userAgent: string;
}

export interface AdsResource {
  readonly typeUrl: string;
  readonly value: Uint8Array;
}

/**
 * What the handler made of a response: applied (ACK) or rejected with a
 * detail (NACK). `retryMs`: the handler may load it later (room that is being
 * freed); the client hands it the same response again after that long, unless
 * a newer one came, and ACKs it then if it loads. ADS never resends a NACKed
 * version, so without this it would wait for an unrelated change.
 */
export type AdsVerdict =
  { readonly ok: true } | { readonly ok: false; readonly detail: string; readonly retryMs?: number };

/** Retries of one NACKed response, at most. */
export const MAX_RETRIES = 5;

export interface AgentAdsClientOptions {
  /** host:port */
  readonly server: string;
  /** TLS to the server (absent: plaintext). */
  readonly tls?: ClientTlsMaterial;
  readonly node: AdsNode;
  readonly typeUrl: string;
  /** Loads one response; the client ACKs or NACKs it by the verdict. */
  readonly onResponse: (
    version: string,
    resources: readonly AdsResource[],
    retry?: { readonly retry: number },
  ) => AdsVerdict;
  readonly onConnected?: (first: boolean) => void;
  readonly onLost?: (why: string, retryMs: number) => void;
}

interface RawResponse {
  version_info?: string;
  resources?: { type_url?: string; value?: Uint8Array }[];
  type_url?: string;
  nonce?: string;
}

export class AgentAdsClient {
  private readonly client: grpc.Client;
  private readonly backoff: grpc.experimental.BackoffTimeout;
  private call: grpc.ClientDuplexStream<Buffer, Buffer> | undefined;
  private stopping = false;
  private first = true;
  private applied = '';
  private retry: NodeJS.Timeout | undefined;
  private readonly Request = messageType('envoy.service.discovery.v3.DiscoveryRequest');
  private readonly Response = messageType('envoy.service.discovery.v3.DiscoveryResponse');

  constructor(private readonly opts: AgentAdsClientOptions) {
    this.client = new grpc.Client(opts.server, channelCredentials(opts.tls));
    this.backoff = new grpc.experimental.BackoffTimeout(() => this.connect(), {
      initialDelay: 250,
      multiplier: 2,
      maxDelay: 5000,
      jitter: 0.2,
    });
    this.backoff.unref();
  }

  /** Opens the stream (and reopens it whenever it is lost, until stop()). */
  start(): void {
    this.connect();
  }

  stop(): void {
    this.stopping = true;
    clearTimeout(this.retry);
    this.backoff.stop();
    this.call?.cancel();
    this.client.close();
  }

  private connect(): void {
    if (this.stopping) return;
    const c = this.client.makeBidiStreamRequest<Buffer, Buffer>(
      ADS_METHOD,
      (b) => b,
      (b) => b,
    );
    this.call = c;
    let got = false;
    c.on('data', (b: Buffer) => {
      if (!got) {
        got = true;
        this.backoff.reset();
        this.opts.onConnected?.(this.first);
        this.first = false;
      }
      this.onData(b);
    });
    const lost = (why: string): void => {
      if (this.call !== c) return;
      this.call = undefined;
      clearTimeout(this.retry);
      if (this.stopping) return;
      this.backoff.runOnce();
      this.opts.onLost?.(why, this.backoff.getEndTime().getTime() - Date.now());
    };
    c.on('error', (err: Error) => lost(err.message));
    c.on('end', () => lost('stream ended'));
    this.send({ version_info: this.applied });
  }

  private onData(bytes: Buffer): void {
    const res = this.Response.toObject(this.Response.decode(bytes), { defaults: true }) as RawResponse;
    if (res.type_url !== this.opts.typeUrl) return;
    const version = res.version_info ?? '';
    const resources = (res.resources ?? []).map((r) => ({
      typeUrl: r.type_url ?? '',
      value: r.value ?? new Uint8Array(),
    }));
    clearTimeout(this.retry); // a newer response supersedes a retry of an older one
    const nonce = res.nonce ?? '';
    const verdict = this.opts.onResponse(version, resources);
    if (verdict.ok) {
      this.applied = version;
      this.send({ version_info: version, response_nonce: nonce });
    } else {
      this.send({
        version_info: this.applied,
        response_nonce: nonce,
        error_detail: { code: grpc.status.INVALID_ARGUMENT, message: verdict.detail },
      });
      if (verdict.retryMs !== undefined) this.retryLater(version, nonce, resources, verdict.retryMs, 1);
    }
  }

  /** Hands a NACKed response to the handler again; ACKs it (the same nonce, the latest) once it loads. */
  private retryLater(
    version: string,
    nonce: string,
    resources: readonly AdsResource[],
    ms: number,
    attempt: number,
  ): void {
    const call = this.call;
    this.retry = setTimeout(() => {
      if (this.stopping || this.call !== call) return;
      const verdict = this.opts.onResponse(version, resources, { retry: attempt });
      if (verdict.ok) {
        this.applied = version;
        this.send({ version_info: version, response_nonce: nonce });
      } else if (verdict.retryMs !== undefined && attempt < MAX_RETRIES) {
        this.retryLater(version, nonce, resources, verdict.retryMs, attempt + 1);
      }
    }, ms);
    this.retry.unref();
  }

  private send(fields: object): void {
    const n = this.opts.node;
    const req = {
      node: {
        id: n.id,
        cluster: n.cluster,
        locality: { region: n.locality.region, zone: n.locality.zone, sub_zone: n.locality.subzone },
        user_agent_name: n.userAgent,
      },
      type_url: this.opts.typeUrl,
      resource_names: [],
      ...fields,
    };
    this.call?.write(Buffer.from(this.Request.encode(this.Request.fromObject(req)).finish()));
  }
}
