/** The channel credentials of Canopy's own gRPC clients (CSDS, the agent's ADS and LRS): TLS or plaintext. */
import * as grpc from '@grpc/grpc-js';

/** PEM material for a TLS channel: the CA for the server's certificate, a client certificate for mTLS. */
export interface ClientTlsMaterial {
  readonly ca?: Buffer;
  readonly cert?: Buffer;
  readonly key?: Buffer;
}

/** TLS when given material (the CA, a client certificate or both), plaintext without. */
export function channelCredentials(tls: ClientTlsMaterial | undefined): grpc.ChannelCredentials {
  return tls
    ? grpc.credentials.createSsl(tls.ca ?? null, tls.key ?? null, tls.cert ?? null)
    : grpc.credentials.createInsecure();
}
