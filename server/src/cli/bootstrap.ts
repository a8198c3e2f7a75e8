/**
 * `canopy bootstrap envoy|grpc`: the bootstrap file a client needs to reach Canopy, for a node id and
 * locality. Envoy's is YAML (delta ADS, its outbound listeners on a local address); gRPC's is the JSON
 * that GRPC_XDS_BOOTSTRAP names.
 */
import { Argument, InvalidArgumentError, Option, type Command } from 'commander';
import { dump } from 'js-yaml';
import { CodedError } from '../domain/errors.js';
import { envoyBootstrap, grpcBootstrap, type BootstrapOptions } from '../resources/bootstrap.js';
import { CliError, EXIT_USAGE, writeOutput } from './common.js';

export { envoyBootstrap, grpcBootstrap, type BootstrapOptions } from '../resources/bootstrap.js';

export function registerBootstrap(program: Command): void {
  program
    .command('bootstrap')
    .description('write the bootstrap a client needs to reach Canopy (Envoy YAML or gRPC JSON)')
    .addArgument(new Argument('<kind>', 'the client').choices(['envoy', 'grpc']))
    .addOption(
      new Option('--node-id <id>', "the client's node id (not empty)").makeOptionMandatory().argParser(nonEmpty),
    )
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
        const text = usage(() =>
          kind === 'envoy' ? envoyBootstrapYaml(opts) : `${JSON.stringify(grpcBootstrap(opts), null, 2)}\n`,
        );
        if (o.out === undefined) process.stdout.write(text);
        else {
          await writeOutput(o.out, text, '-O');
          process.stderr.write(`wrote ${o.out}\n`);
        }
      },
    );
}

/** A node id is how the server and CSDS tell clients apart: an empty one is refused. */
function nonEmpty(raw: string): string {
  if (raw.trim() === '') throw new InvalidArgumentError('must not be empty.');
  return raw;
}

/** A flag the builder refuses is a usage error (exit 2), as commander's own are. */
function usage<T>(build: () => T): T {
  try {
    return build();
  } catch (err) {
    if (err instanceof CodedError && err.code === 'CANOPY_BAD_OPTION') throw new CliError(err.message, EXIT_USAGE);
    throw err;
  }
}

function envoyBootstrapYaml(o: BootstrapOptions): string {
  return `# Envoy bootstrap for node ${o.nodeId}, written by \`canopy bootstrap envoy\`: run \`envoy -c FILE\`.\n${dump(envoyBootstrap(o), { lineWidth: 120, noRefs: true })}`;
}
