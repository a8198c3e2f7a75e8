/**
 * The bootstrap a client needs to reach Canopy, for a node id and locality: Envoy's (delta ADS, load
 * reports through cluster_manager.load_stats_config, its outbound listeners on a local address) and
 * gRPC's (the JSON GRPC_XDS_BOOTSTRAP names). `canopy bootstrap` prints them; the demo starts Envoys
 * with them. A bad address is a CodedError CANOPY_BAD_OPTION naming the flag.
 */
import ipaddr from 'ipaddr.js';
import { CodedError } from '../domain/errors.js';

export interface BootstrapOptions {
  readonly nodeId: string;
  readonly cluster: string;
  readonly region: string;
  readonly zone: string;
  readonly subzone: string;
  readonly xds: string;
  readonly outboundAddress: string;
  readonly envoyAdminPort: number;
  /** envoy: the sidecar's own service, for zone-aware routing (its local_cluster). */
  readonly localService?: string;
  /** envoy: the ADS flavour, delta (the default) or state of the world. */
  readonly api?: 'delta' | 'sotw';
  /** envoy: lazy xDS for this node (`canopy.lazy`): its LDS/CDS hold its demand set. */
  readonly lazy?: boolean;
  /** envoy: the services it declares up front (`canopy.demand`). */
  readonly demand?: readonly string[];
  /** TLS to Canopy: the CA file that signs its certificate, and a client certificate and key where mTLS is on. */
  readonly tls?: BootstrapTls;
}

/** Files the client reads (absolute paths: the client's working directory is not the CLI's). */
export interface BootstrapTls {
  readonly caFile: string;
  readonly certFile?: string;
  readonly keyFile?: string;
}

/** Every replica named by --xds (comma-separated), each HOST:PORT. */
function xdsAddresses(xds: string): { uri: string; host: string; port: number }[] {
  return xds.split(',').map((a) => ({ uri: a.trim(), ...splitHostPort(a.trim()) }));
}

function splitHostPort(xds: string): { host: string; port: number } {
  const m = /^(?:\[([^\]]+)\]|([^:]+)):(\d+)$/.exec(xds);
  const port = Number(m?.[3]);
  if (!m || port < 1 || port > 65535)
    throw new CodedError('CANOPY_BAD_OPTION', `--xds must be HOST:PORT, got "${xds}"`);
  return { host: m[1] ?? m[2]!, port };
}

/** gRFC A65's `tls` channel credentials (gRPC C-core, Go, Java; @grpc/grpc-js-xds 1.14 has only insecure). */
function grpcChannelCreds(tls: BootstrapTls | undefined): object[] {
  if (!tls) return [{ type: 'insecure' }];
  const config = {
    ca_certificate_file: tls.caFile,
    ...(tls.certFile !== undefined ? { certificate_file: tls.certFile, private_key_file: tls.keyFile } : {}),
  };
  return [{ type: 'tls', config }];
}

export function grpcBootstrap(o: BootstrapOptions): object {
  return {
    xds_servers: xdsAddresses(o.xds).map((a) => ({
      server_uri: a.uri,
      channel_creds: grpcChannelCreds(o.tls),
      server_features: ['xds_v3'],
    })),
    node: { id: o.nodeId, cluster: o.cluster, locality: { region: o.region, zone: o.zone, sub_zone: o.subzone } },
  };
}

export function envoyBootstrap(o: BootstrapOptions): object {
  const replicas = xdsAddresses(o.xds);
  if (!ipaddr.isValid(o.outboundAddress))
    throw new CodedError('CANOPY_BAD_OPTION', `--outbound-address must be an IP address, got "${o.outboundAddress}"`);
  return {
    node: {
      id: o.nodeId,
      cluster: o.cluster,
      locality: { region: o.region, zone: o.zone, sub_zone: o.subzone },
      metadata: {
        'canopy.client_kind': 'envoy',
        'canopy.outbound_address': o.outboundAddress,
        ...(o.localService ? { 'canopy.local_service': o.localService } : {}),
        ...(o.lazy ? { 'canopy.lazy': true } : {}),
        ...(o.demand?.length ? { 'canopy.demand': o.demand.join(',') } : {}),
      },
    },
    cluster_manager: {
      // Zone-aware routing compares the upstream's zones with the sidecar's own service's (istiod's self-discovery).
      ...(o.localService ? { local_cluster_name: 'local_cluster' } : {}),
      // Load reports for load-aware services: Envoy (1.40 included) opens StreamLoadStats only from here; it does
      // not implement a Cluster's lrs_server (envoyproxy/envoy#43326). Canopy answers with the clusters to report.
      load_stats_config: {
        api_type: 'GRPC',
        transport_api_version: 'V3',
        grpc_services: [{ envoy_grpc: { cluster_name: 'canopy' } }],
      },
    },
    dynamic_resources: {
      ads_config: {
        api_type: o.api === 'sotw' ? 'GRPC' : 'DELTA_GRPC',
        transport_api_version: 'V3',
        set_node_on_first_message_only: true,
        // Envoy's default reconnect backoff grows to 30 s: after an outage of a few seconds it could wait ~8 s
        // more to come back (measured in e2e/envoy-faults.test.ts). 4 s at most, jittered.
        grpc_services: [
          {
            envoy_grpc: {
              cluster_name: 'canopy',
              retry_policy: { retry_back_off: { base_interval: '0.5s', max_interval: '4s' } },
            },
          },
        ],
      },
      cds_config: { ads: {}, resource_api_version: 'V3' },
      lds_config: { ads: {}, resource_api_version: 'V3' },
    },
    static_resources: {
      clusters: [
        canopyCluster(replicas, o.tls),
        ...(o.localService
          ? [
              {
                name: 'local_cluster',
                type: 'EDS',
                connect_timeout: '1s',
                eds_cluster_config: {
                  eds_config: { ads: {}, resource_api_version: 'V3' },
                  service_name: 'local_cluster',
                },
              },
            ]
          : []),
      ],
    },
    admin: { address: { socket_address: { address: '127.0.0.1', port_value: o.envoyAdminPort } } },
  };
}

/** The static cluster of Canopy's replicas: ADS and load reports go to it over HTTP/2. */
function canopyCluster(replicas: readonly { host: string; port: number }[], tls?: BootstrapTls): object {
  return {
    ...(tls ? { transport_socket: upstreamTls(tls, replicas) } : {}),
    name: 'canopy',
    // An IP needs no resolver; a name is resolved (and re-resolved) by Envoy.
    type: replicas.every((r) => ipaddr.isValid(r.host)) ? 'STATIC' : 'STRICT_DNS',
    connect_timeout: '1s',
    typed_extension_protocol_options: {
      'envoy.extensions.upstreams.http.v3.HttpProtocolOptions': {
        '@type': 'type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions',
        explicit_http_config: { http2_protocol_options: {} },
      },
    },
    load_assignment: {
      cluster_name: 'canopy',
      // Several replicas: each ADS stream goes to one, and a stream that fails reconnects to the next.
      endpoints: [
        {
          lb_endpoints: replicas.map((r) => ({
            endpoint: { address: { socket_address: { address: r.host, port_value: r.port } } },
          })),
        },
      ],
    },
  };
}

/** TLS to Canopy's replicas: the chain checked against the CA file, HTTP/2 by ALPN, a client certificate for mTLS. */
function upstreamTls(tls: BootstrapTls, replicas: readonly { host: string }[]): object {
  const first = replicas[0]!.host;
  // Envoy checks only the chain unless told which names to expect: each replica's certificate must name its host.
  const names = [...new Set(replicas.map((r) => r.host))].map((h) => ({
    san_type: ipaddr.isValid(h) ? 'IP_ADDRESS' : 'DNS',
    matcher: { exact: h },
  }));
  return {
    name: 'envoy.transport_sockets.tls',
    typed_config: {
      '@type': 'type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext',
      // A name is sent as SNI; an IP is not (RFC 6066 forbids IP literals there).
      ...(ipaddr.isValid(first) ? {} : { sni: first }),
      common_tls_context: {
        alpn_protocols: ['h2'],
        validation_context: { trusted_ca: { filename: tls.caFile }, match_typed_subject_alt_names: names },
        ...(tls.certFile !== undefined
          ? {
              tls_certificates: [
                { certificate_chain: { filename: tls.certFile }, private_key: { filename: tls.keyFile } },
              ],
            }
          : {}),
      },
    },
  };
}
