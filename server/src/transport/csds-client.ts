/**
 * A CSDS client for `canopy proxy-status`: one FetchClientStatus call to a server's xDS port, the
 * admin token (when given) as `authorization: Bearer` metadata, the answer decoded with Envoy's
 * csds.proto.
 */
import * as grpc from '@grpc/grpc-js';
import { messageType } from '../wire/protos.js';
import { CodedError } from '../domain/errors.js';
import { channelCredentials, type ClientTlsMaterial } from './client-credentials.js';

export interface CsdsResource {
  readonly type_url: string;
  readonly name: string;
  readonly version_info: string;
  readonly config_status: string;
  readonly client_status: string;
  readonly error_state?: { readonly details: string; readonly version_info: string } | null;
}

export interface CsdsClientConfig {
  readonly node: { readonly id: string; readonly cluster: string; readonly locality?: Record<string, string> };
  readonly generic_xds_configs: readonly CsdsResource[];
}

export type CsdsClientTls = ClientTlsMaterial;

const METHOD = '/envoy.service.status.v3.ClientStatusDiscoveryService/FetchClientStatus';

export async function fetchClientStatus(
  address: string,
  opts: { token?: string; credentials?: grpc.ChannelCredentials; tls?: CsdsClientTls; deadlineMs?: number } = {},
): Promise<CsdsClientConfig[]> {
  const request = messageType('envoy.service.status.v3.ClientStatusRequest');
  const response = messageType('envoy.service.status.v3.ClientStatusResponse');
  const credentials = opts.credentials ?? channelCredentials(opts.tls);
  const client = new grpc.Client(address, credentials);
  const metadata = new grpc.Metadata();
  if (opts.token !== undefined) metadata.set('authorization', `Bearer ${opts.token}`);
  try {
    const bytes = await new Promise<Buffer>((resolve, reject) =>
      client.makeUnaryRequest(
        METHOD,
        () => Buffer.from(request.encode(request.create({})).finish()),
        (b: Buffer) => b,
        {},
        metadata,
        { deadline: Date.now() + (opts.deadlineMs ?? 10_000) },
        (err, value) =>
          err || !value ? reject(err ?? new CodedError('CANOPY_PEER_FAILED', 'empty answer')) : resolve(value),
      ),
    );
    const decoded = response.toObject(response.decode(bytes), { enums: String, longs: String, arrays: true }) as {
      config: CsdsClientConfig[];
    };
    return decoded.config;
  } finally {
    client.close();
  }
}
