/**
 * `canopy serve --config FILE`: runs the control plane. Flags override env, env overrides the file,
 * the file overrides the defaults. Both ports are checked free before the store is opened, so a busy
 * port fails with its flag named and nothing written.
 */
import net from 'node:net';
import { Command, Option } from 'commander';
import type { Canopy, KubeOptions } from '../main.js';
import type { ServeSecurity } from './serve-security.js';
import { CliError, EXIT_USAGE, intIn } from './common.js';
import { DEFAULT_HEAP_GROWTH_PERCENT, MAX_HEAP_GROWTH_PERCENT, setHeapGrowth } from '../platform/heap-growth.js';
import { addKubeOptions, kubeOptions } from './serve-kube.js';
import { serveLogger } from './serve-log.js';
import { FlagError, readServeSecurity, SECURITY_FLAGS, type SecurityValues } from './serve-security.js';
import { untilSignal } from '../platform/signals.js';

/** The server's defaults (main.ts), repeated for the help text without loading the server. */
const DEFAULT_XDS_PORT = 18000;
const DEFAULT_ADMIN_PORT = 18080;

/** Where `canopy serve` keeps services when neither --data-dir nor CANOPY_DATA_DIR says. */
const DEFAULT_DATA_DIR = 'canopy-data';

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

/** Help text and env of the access-control flags (their parsing lives in serve-security.ts). */
const SECURITY_HELP: Record<string, [string, string]> = {
  'admin-token-file': [
    'writes (and reads unless --admin-open-reads) need Authorization: Bearer <token>',
    'CANOPY_ADMIN_TOKEN_FILE',
  ],
  'admin-open-reads': ['with a token, leave GETs open', 'CANOPY_ADMIN_OPEN_READS'],
  'admin-hostname': ['a DNS name requests may carry in Host (repeatable)', 'CANOPY_ADMIN_HOSTNAMES'],
  'insecure-admin': ['allow a non-loopback --admin-host without a token', 'CANOPY_INSECURE_ADMIN'],
  'tls-cert': ['PEM certificate: HTTPS on the admin port, TLS on the xDS port', 'CANOPY_TLS_CERT'],
  'tls-key': ['PEM key for --tls-cert', 'CANOPY_TLS_KEY'],
  'client-ca': ['mTLS on xDS: clients need a certificate this CA signed', 'CANOPY_CLIENT_CA'],
  'admin-body-limit': ['largest admin request body in bytes (default 16 MiB)', 'CANOPY_ADMIN_BODY_LIMIT'],
  'admin-write-limit': ['admin writes per client address per 10 s (default 600)', 'CANOPY_ADMIN_WRITE_LIMIT'],
  'xds-read-rules': [
    'with --client-ca: a YAML file mapping SPIFFE IDs to the services each may read (default: all read all)',
    'CANOPY_XDS_READ_RULES',
  ],
  'xds-max-streams-per-connection': [
    'xDS streams one connection may hold open',
    'CANOPY_XDS_MAX_STREAMS_PER_CONNECTION',
  ],
  'xds-max-names-per-connection': [
    'resource names one connection may subscribe to, over its streams',
    'CANOPY_XDS_MAX_NAMES_PER_CONNECTION',
  ],
  'xds-max-bytes-per-connection': [
    'bytes of subscription state one connection may hold (e.g. 64MiB)',
    'CANOPY_XDS_MAX_BYTES_PER_CONNECTION',
  ],
  'xds-subscription-budget': [
    'bytes of subscription state all xDS clients together may hold (default: from the heap limit)',
    'CANOPY_XDS_SUBSCRIPTION_BUDGET',
  ],
};

export function registerServe(program: Command): void {
  const serve = program
    .command('serve')
    .description('run the control plane: xDS (ADS) for Envoy, gRPC and node agents, and the admin API')
    .addOption(
      new Option(
        '-c, --config <file>',
        'the mesh config (YAML or .json); required unless Kubernetes is the source',
      ).env('CANOPY_CONFIG'),
    )
    .addOption(
      new Option('--data-dir <dir>', 'the embedded database (one canopy process per directory)')
        .env('CANOPY_DATA_DIR')
        .default(DEFAULT_DATA_DIR),
    )
    .addOption(
      new Option('--store <url>', 'etcd://HOST:PORT[,…][/prefix/]: keep services in etcd, shared by replicas').env(
        'CANOPY_STORE',
      ),
    )
    .addOption(new Option('--host <host>', 'both listeners (default: server.host, else 127.0.0.1)').env('CANOPY_HOST'))
    .addOption(new Option('--xds-host <host>', 'where the xDS port listens (default: --host)').env('CANOPY_XDS_HOST'))
    .addOption(
      new Option('--admin-host <host>', 'where the admin port listens (default: --host)').env('CANOPY_ADMIN_HOST'),
    )
    .addOption(
      new Option('--xds-port <n>', `xDS port; 0 = any free port (default: server.xdsPort, else ${DEFAULT_XDS_PORT})`)
        .env('CANOPY_XDS_PORT')
        .argParser(intIn(0, 65535)),
    )
    .addOption(
      new Option('--admin-port <n>', `admin port (default: server.adminPort, else ${DEFAULT_ADMIN_PORT})`)
        .env('CANOPY_ADMIN_PORT')
        .argParser(intIn(0, 65535)),
    )
    .addOption(
      new Option('--debounce-ms <n>', 'merge changes this long before pushing (default: server.debounceMs, else 100)')
        .env('CANOPY_DEBOUNCE_MS')
        .argParser(intIn(0, 3_600_000)),
    )
    .addOption(
      new Option('--leds <on|off>', 'LEDS for Envoy on delta ADS (default: server.leds, else on)')
        .env('CANOPY_LEDS')
        .choices(['on', 'off']),
    )
    .addOption(
      new Option(
        '--heap-growth <percent>',
        'how far the JS heap grows past what the last full collection kept before the next one starts ' +
          '(V8 --heap-growing-percent; 0 = V8 decides)',
      )
        .env('CANOPY_HEAP_GROWTH')
        .argParser(intIn(0, MAX_HEAP_GROWTH_PERCENT))
        .default(DEFAULT_HEAP_GROWTH_PERCENT),
    )
    .addOption(
      new Option('--log-level <level>', 'log level').env('CANOPY_LOG_LEVEL').choices(LOG_LEVELS).default('info'),
    )
    .addOption(
      new Option(
        '--log-format <format>',
        'pretty: human-readable lines (the default when standard output is a terminal); json: one JSON object a line',
      )
        .env('CANOPY_LOG_FORMAT')
        .choices(['pretty', 'json']),
    )
    .addOption(
      new Option(
        '--take-over',
        "with --store etcd: apply this replica's config file although the live replicas apply another",
      ).env('CANOPY_TAKE_OVER'),
    )
    .addOption(
      new Option(
        '--accept-store-loss',
        'start on a data directory whose log lost acknowledged writes, logging what was lost',
      ),
    );
  addKubeOptions(serve);
  for (const [flag, spec] of Object.entries(SECURITY_FLAGS)) {
    const [help, env] = SECURITY_HELP[flag] ?? ['see docs/operations.md', ''];
    // Env is read by readServeSecurity (some variables hold lists or the token itself): named in the help only.
    const text = env ? `${help} (env: ${env})` : help;
    const option = spec.type === 'boolean' ? new Option(`--${flag}`, text) : new Option(`--${flag} <value>`, text);
    if ('multiple' in spec && spec.multiple)
      option.argParser((v: string, prev: string[] | undefined) => [...(prev ?? []), v]);
    serve.addOption(option);
  }
  serve.addHelpText('after', '\nFlags override env, env overrides the config file. Reference: docs/configuration.md');
  serve.action(async (_opts: unknown, cmd: Command) => {
    const { canopy, note } = await runServe(cmd);
    process.stderr.write(`canopy: ready; the web view is at ${canopy.webView}\n`);
    const stopped = untilSignal(() => canopy.stop());
    // After ready, with signals handled: the note may read the file (config/config-source.ts, overrides).
    await note().catch(() => {});
    await stopped;
  });
}

interface ServeValues {
  config?: string;
  kubeconfig?: string;
  kubeInCluster?: boolean;
  kubeNamespace?: string[];
  kubeSubzoneLabel: string;
  kubeUnreachableMs: number;
  kubeCrdCheckMs: number;
  dataDir: string;
  store?: string;
  host?: string;
  xdsHost?: string;
  adminHost?: string;
  xdsPort?: number;
  adminPort?: number;
  debounceMs?: number;
  leds?: 'on' | 'off';
  heapGrowth: number;
  logLevel: string;
  logFormat?: 'pretty' | 'json';
  acceptStoreLoss?: boolean;
  takeOver?: boolean;
}

async function runServe(cmd: Command): Promise<{ canopy: Canopy; note: () => Promise<void> }> {
  // Loaded here, not at the top: every other subcommand (and --help) starts without the server's modules.
  const { startCanopy } = await import('../main.js');
  const { readStartConfig } = await import('../config/config-start.js');
  const values = cmd.opts<ServeValues>();
  const kube = kubeOptions(values);
  if (!values.config && !kube)
    throw new CliError(
      'serve: --config FILE (or CANOPY_CONFIG) is required, unless --kubeconfig FILE or --kube-in-cluster is given',
      EXIT_USAGE,
    );
  // Before the config load: a big file's parse is the first burst of garbage (heap-growth.ts).
  setHeapGrowth(values.heapGrowth);
  let security;
  try {
    security = await readServeSecurity(securityValues(cmd), process.env);
  } catch (err) {
    if (!(err instanceof FlagError)) throw err;
    throw new CliError(err.message, EXIT_USAGE);
  }
  // A data directory that already holds this very file spares its parse (config/config-record.ts).
  const loaded = values.config
    ? await readStartConfig(values.config, values.store === undefined ? values.dataDir : undefined)
    : undefined;
  if (!loaded) return serveKubeOnly(values, kube!, security);
  if (!loaded.ok) {
    const lines = loaded.errors.map((e) => `  ${e.path || '(root)'}: ${e.message}`).join('\n');
    throw new CliError(`invalid config ${values.config}:\n${lines}`);
  }
  const startConfig = loaded.value;
  const file = values.config!;
  const config = startConfig.config;
  for (const n of config.notes ?? []) process.stderr.write(`canopy: note: ${n.path}: ${n.message}\n`);
  const host = values.host ?? config.server.host ?? '127.0.0.1';
  const xdsHost = values.xdsHost ?? host;
  const adminHost = values.adminHost ?? host;
  await assertPortFree(
    'xDS',
    xdsHost,
    values.xdsPort ?? config.server.xdsPort ?? DEFAULT_XDS_PORT,
    '--xds-port, CANOPY_XDS_PORT',
  );
  await assertPortFree(
    'admin',
    adminHost,
    values.adminPort ?? config.server.adminPort ?? DEFAULT_ADMIN_PORT,
    '--admin-port, CANOPY_ADMIN_PORT',
  );
  const canopy = await startCanopy({
    config,
    configPath: file,
    startConfig,
    ...(values.takeOver ? { takeOver: true } : {}),
    security,
    ...(values.host !== undefined ? { host: values.host } : {}),
    ...(await flagOptions(values)),
    ...(kube ? { kube } : {}),
  });
  const note = (): Promise<void> => reportStoreOverrides(canopy, values.store ?? values.dataDir);
  return { canopy, note };
}

/** What `canopy serve`'s flags set alike with a config file and with Kubernetes alone: the store, listeners, logs. */
async function flagOptions(values: ServeValues) {
  return {
    ...(values.store !== undefined ? { storeUrl: values.store } : { dataDir: values.dataDir }),
    ...(values.acceptStoreLoss ? { acceptStoreLoss: true } : {}),
    ...(values.xdsHost !== undefined ? { xdsHost: values.xdsHost } : {}),
    ...(values.adminHost !== undefined ? { adminHost: values.adminHost } : {}),
    ...(values.xdsPort !== undefined ? { xdsPort: values.xdsPort } : {}),
    ...(values.adminPort !== undefined ? { adminPort: values.adminPort } : {}),
    ...(values.debounceMs !== undefined ? { debounceMs: values.debounceMs } : {}),
    logLevel: values.logLevel,
    logger: await serveLogger(values.logLevel, values.logFormat),
    heapGrowth: values.heapGrowth,
    ...(values.leds !== undefined ? { leds: values.leds === 'on' } : {}),
  };
}

/** Kubernetes the only source: no config file, the server's settings from flags and env. */
async function serveKubeOnly(
  values: ServeValues,
  kube: KubeOptions,
  security: Partial<ServeSecurity>,
): Promise<{ canopy: Canopy; note: () => Promise<void> }> {
  const { startCanopy } = await import('../main.js');
  const host = values.host ?? '127.0.0.1';
  await assertPortFree(
    'xDS',
    values.xdsHost ?? host,
    values.xdsPort ?? DEFAULT_XDS_PORT,
    '--xds-port, CANOPY_XDS_PORT',
  );
  await assertPortFree(
    'admin',
    values.adminHost ?? host,
    values.adminPort ?? DEFAULT_ADMIN_PORT,
    '--admin-port, CANOPY_ADMIN_PORT',
  );
  const canopy = await startCanopy({
    config: { services: [], server: {} },
    security,
    host,
    ...(await flagOptions(values)),
    kube,
  });
  return { canopy, note: async () => {} };
}

/** Commander's camelCase values back under the flag names serve-security.ts reads. */
function securityValues(cmd: Command): SecurityValues {
  const out: Record<string, unknown> = {};
  for (const option of cmd.options) {
    const flag = option.long?.slice(2);
    if (flag === undefined || !(flag in SECURITY_FLAGS)) continue;
    const v = cmd.getOptionValue(option.attributeName()) as unknown;
    if (v !== undefined) out[flag] = v;
  }
  return out as SecurityValues;
}

/**
 * A listener bound and released at once: a port in use (or a host this machine lacks) fails here with
 * the flag that chose it, before the store is opened, instead of as grpc-js' "No address added".
 */
async function assertPortFree(what: string, host: string, port: number, flags: string): Promise<void> {
  if (port === 0) return;
  await new Promise<void>((resolve, reject) => {
    const probe = net.createServer();
    probe.once('error', (err: NodeJS.ErrnoException) => {
      const why =
        err.code === 'EADDRINUSE'
          ? 'is in use'
          : err.code === 'EACCES'
            ? 'needs privileges to bind'
            : err.code === 'EADDRNOTAVAIL'
              ? `cannot be bound: ${host} is not an address of this machine`
              : `cannot be bound (${err.code ?? err.message})`;
      reject(new CliError(`${what} port ${port} on ${host} ${why} (${flags})`));
    });
    probe.listen({ host, port, exclusive: true }, () => probe.close(() => resolve()));
  });
}

/**
 * Health or weight set through the API survives a restart while the file's entry is unchanged (the
 * ownership rule). Say so, so that a file that looks authoritative does not surprise the operator. What
 * the store keeps is the config source's to tell (config/config-overrides.ts); this only words it.
 */
async function reportStoreOverrides(canopy: Canopy, where: string): Promise<void> {
  const kept = await canopy.configSource.overrides();
  if (!kept) return;
  process.stderr.write(
    `canopy: note: the store (${where}) keeps API changes over the unchanged config file: ` +
      `${kept.endpoints} endpoint(s) in ${kept.services.length} service(s): ${kept.services.join(', ')}. ` +
      'Edit the file entry or PUT the service to replace them.\n',
  );
}
