/**
 * `canopy bootstrap envoy|grpc`: the bootstrap file a client needs to reach Canopy, for a node id and
 * locality. Envoy's is YAML (delta ADS, its outbound listeners on a local address); gRPC's is the JSON
 * that GRPC_XDS_BOOTSTRAP names.
 */
import { writeFile } from 'node:fs/promises';
import { Argument, Option, type Command } from 'commander';
import ipaddr from 'ipaddr.js';
import { dump } from 'js-yaml';
import { CliError, EXIT_USAGE } from './common.js';

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
}

export function registerBootstrap(program: Command): void {
  program
    .command('bootstrap')
    .description('write the bootstrap a client needs to reach Canopy (Envoy YAML or gRPC JSON)')
    .addArgument(new Argument('<kind>', 'the client').choices(['envoy', 'grpc']))
    .requiredOption('--node-id <id>', "the client's node id")
    .option('--cluster <name>', "the client's cluster (its service name)", 'app')
    .option('--region <r>', 'locality region', '')
    .option('--zone <z>', 'locality zone', '')
    .option('--subzone <s>', 'locality subzone', '')
    .addOption(
      new Option('--xds <host:port>', "Canopy's xDS address; replicas comma-separated (HOST:PORT,HOST:PORT)")
        .env('CANOPY_XDS_ADDRESS')
        .default('127.0.0.1:18000'),
    )
    .option('--outbound-address <ip>', "envoy: where the sidecar's outbound listeners bind", '127.0.0.1')
    .option(
      '--envoy-admin-port <n>',
      "envoy: the sidecar's admin port on 127.0.0.1 (0: any free port; Envoy's --admin-address-path says which)",
      '9901',
    )
    .option(
      '--local-service <name>',
      "envoy: the sidecar's own service, sent as its local cluster for zone-aware routing (policy.zoneAware)",
    )
    .option('-O, --out <file>', 'write to this file (default: standard output)')
    .action(
      async (
        kind: 'envoy' | 'grpc',
        o: Omit<BootstrapOptions, 'envoyAdminPort'> & { envoyAdminPort: string; out?: string },
      ) => {
        const port = Number(o.envoyAdminPort);
        if (!Number.isInteger(port) || port < 0 || port > 65535)
          throw new CliError(
            `--envoy-admin-port must be an integer in 0..65535, got "${o.envoyAdminPort}"`,
            EXIT_USAGE,
          );
        const opts = { ...o, envoyAdminPort: port };
        const text = kind === 'envoy' ? envoyBootstrapYaml(opts) : `${JSON.stringify(grpcBootstrap(opts), null, 2)}\n`;
        if (o.out === undefined) process.stdout.write(text);
        else {
          await writeFile(o.out, text);
          process.stderr.write(`wrote ${o.out}\n`);
        }
      },
    );
}

/** Every replica named by --xds (comma-separated), each HOST:PORT. */
function xdsAddresses(xds: string): { uri: string; host: string; port: number }[] {
  return xds.split(',').map((a) => ({ uri: a.trim(), ...splitHostPort(a.trim()) }));
}

function splitHostPort(xds: string): { host: string; port: number } {
  const m = /^(?:\[([^\]]+)\]|([^:]+)):(\d+)$/.exec(xds);
  const port = Number(m?.[3]);
  if (!m || port < 1 || port > 65535) throw new CliError(`--xds must be HOST:PORT, got "${xds}"`, EXIT_USAGE);
  return { host: m[1] ?? m[2]!, port };
}

export function grpcBootstrap(o: BootstrapOptions): object {
  return {
    xds_servers: xdsAddresses(o.xds).map((a) => ({
      server_uri: a.uri,
      channel_creds: [{ type: 'insecure' }],
      server_features: ['xds_v3'],
    })),
    node: { id: o.nodeId, cluster: o.cluster, locality: { region: o.region, zone: o.zone, sub_zone: o.subzone } },
  };
}

export function envoyBootstrap(o: BootstrapOptions): object {
  const replicas = xdsAddresses(o.xds);
  if (!ipaddr.isValid(o.outboundAddress))
    throw new CliError(`--outbound-address must be an IP address, got "${o.outboundAddress}"`, EXIT_USAGE);
  return {
    node: {
      id: o.nodeId,
      cluster: o.cluster,
      locality: { region: o.region, zone: o.zone, sub_zone: o.subzone },
      metadata: {
        'canopy.client_kind': 'envoy',
        'canopy.outbound_address': o.outboundAddress,
        ...(o.localService ? { 'canopy.local_service': o.localService } : {}),
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
        api_type: 'DELTA_GRPC',
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
        {
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
        },
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

function envoyBootstrapYaml(o: BootstrapOptions): string {
  return `# Envoy bootstrap for node ${o.nodeId}, written by \`canopy bootstrap envoy\`: run \`envoy -c FILE\`.\n${dump(envoyBootstrap(o), { lineWidth: 120, noRefs: true })}`;
}
