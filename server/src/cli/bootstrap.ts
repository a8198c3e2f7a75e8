/**
 * `canopy bootstrap envoy|grpc`: the bootstrap file a client needs to reach Canopy, for a node id and
 * locality. Envoy's is YAML (delta ADS, its outbound listeners on a local address); gRPC's is the JSON
 * that GRPC_XDS_BOOTSTRAP names.
 */
import { accessSync, constants } from 'node:fs';
import path from 'node:path';
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
    .option(
      '--outbound-address <ip>',
      "envoy: where the sidecar's outbound listeners bind (each Envoy on a host needs its own)",
      '127.0.0.1',
    )
    .option(
      '--envoy-admin-port <n>',
      "envoy: the sidecar's admin port on 127.0.0.1 (0: any free port; Envoy's --admin-address-path says which)",
      '9901',
    )
    .option(
      '--local-service <name>',
      "envoy: the sidecar's own service, sent as its local cluster for zone-aware routing (policy.zoneAware)",
    )
    .addOption(
      new Option('--api <flavour>', 'envoy: the ADS protocol (on-demand CDS and LEDS need delta)')
        .choices(['delta', 'sotw'])
        .default('delta'),
    )
    .option('--lazy', 'envoy: lazy xDS for this node (canopy.lazy): LDS/CDS hold its demand set, the rest on demand')
    .option('--demand <services>', 'envoy: services it declares up front (canopy.demand), comma-separated', list)
    .option('--ca-file <file>', "TLS to Canopy: the CA that signs Canopy's certificate (serve --tls-cert)")
    .option('--cert-file <file>', 'mTLS to Canopy: the client certificate (with --key-file)')
    .option('--key-file <file>', "mTLS to Canopy: the client certificate's private key")
    .option('-O, --out <file>', 'write to this file (default: standard output)')
    .action(async (kind: 'envoy' | 'grpc', o: RawOptions) => {
      const opts = bootstrapOptions(kind, o);
      const text = usage(() =>
        kind === 'envoy' ? envoyBootstrapYaml(opts) : `${JSON.stringify(grpcBootstrap(opts), null, 2)}\n`,
      );
      if (o.out === undefined) process.stdout.write(text);
      else {
        await writeOutput(o.out, text, '-O');
        process.stderr.write(`wrote ${o.out}\n`);
      }
    });
}

type RawOptions = Omit<BootstrapOptions, 'envoyAdminPort' | 'tls'> & {
  envoyAdminPort: string;
  out?: string;
  caFile?: string;
  certFile?: string;
  keyFile?: string;
};

function list(raw: string): string[] {
  return raw
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
}

/** The flags as the builder takes them: the port checked, the TLS files absolute and readable. */
function bootstrapOptions(kind: 'envoy' | 'grpc', o: RawOptions): BootstrapOptions {
  const port = Number(o.envoyAdminPort);
  if (!Number.isInteger(port) || port < 0 || port > 65535)
    throw new CliError(`--envoy-admin-port must be an integer in 0..65535, got "${o.envoyAdminPort}"`, EXIT_USAGE);
  if (kind === 'grpc' && (o.lazy || o.demand || o.api === 'sotw'))
    throw new CliError('--api, --lazy and --demand are for envoy bootstraps', EXIT_USAGE);
  const { caFile, certFile, keyFile, ...rest } = o;
  if ((certFile === undefined) !== (keyFile === undefined))
    throw new CliError('--cert-file and --key-file go together (the client certificate and its key)', EXIT_USAGE);
  if (caFile === undefined && certFile !== undefined)
    throw new CliError("--cert-file needs --ca-file (the CA that signs Canopy's certificate)", EXIT_USAGE);
  const tls =
    caFile === undefined
      ? undefined
      : {
          caFile: readable(caFile, '--ca-file'),
          ...(certFile !== undefined
            ? { certFile: readable(certFile, '--cert-file'), keyFile: readable(keyFile!, '--key-file') }
            : {}),
        };
  return { ...rest, envoyAdminPort: port, ...(tls ? { tls } : {}) };
}

/** The client reads the file from its own working directory, so the bootstrap names it absolutely. */
function readable(file: string, flag: string): string {
  const abs = path.resolve(file);
  try {
    accessSync(abs, constants.R_OK);
  } catch {
    throw new CliError(`${flag}: cannot read ${abs}`, EXIT_USAGE);
  }
  return abs;
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
