/**
 * The gRPC xDS bootstrap a proxyless client reads: which xDS server to ask,
 * and who the client is. node.locality is what Canopy routes on.
 */
import type { Locality } from '../domain/locality.js';

export interface XdsBootstrap {
  readonly xds_servers: readonly {
    readonly server_uri: string;
    readonly channel_creds: readonly { readonly type: 'insecure' }[];
    readonly server_features: readonly string[];
  }[];
  readonly node: {
    readonly id: string;
    readonly cluster: string;
    readonly locality: { readonly region: string; readonly zone: string; readonly sub_zone: string };
    readonly metadata: Readonly<Record<string, unknown>>;
  };
}

export function xdsBootstrap(opts: {
  serverUri: string;
  nodeId: string;
  locality: Locality;
  cluster?: string;
  metadata?: Record<string, unknown>;
}): XdsBootstrap {
  return {
    // xds_v3 is required by grpc-js-xds to speak the v3 transport protocol.
    xds_servers: [{ server_uri: opts.serverUri, channel_creds: [{ type: 'insecure' }], server_features: ['xds_v3'] }],
    node: {
      id: opts.nodeId,
      cluster: opts.cluster ?? 'canopy-demo',
      locality: { region: opts.locality.region, zone: opts.locality.zone, sub_zone: opts.locality.subzone },
      metadata: opts.metadata ?? {},
    },
  };
}
