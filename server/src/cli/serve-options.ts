/**
 * `canopy serve`'s flags: each with its env variable and default, in the order --help lists them, and the values
 * Commander parses them into (serve.ts reads them).
 */
import { Command, Option } from 'commander';
import { intIn } from './common.js';
import { DEFAULT_HEAP_GROWTH_PERCENT, MAX_HEAP_GROWTH_PERCENT } from '../platform/heap-growth.js';
import { addKubeOptions, type KubeValues } from './serve-kube.js';
import { SECURITY_FLAGS } from './serve-security.js';

/** The server's defaults (main.ts), repeated for the help text without loading the server. */
export const DEFAULT_XDS_PORT = 18000;
export const DEFAULT_ADMIN_PORT = 18080;

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

/** Every flag of `canopy serve`, in the order --help lists them. */
export function addServeOptions(serve: Command): void {
  addStoreOptions(serve);
  addListenerOptions(serve);
  addPushOptions(serve);
  addLogOptions(serve);
  addRecoveryOptions(serve);
  addKubeOptions(serve);
  addSecurityOptions(serve);
}

/** Where the mesh comes from and where services are kept: the config file, the data directory or etcd. */
function addStoreOptions(serve: Command): void {
  serve
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
    );
}

/** The two listeners: xDS and the admin API. */
function addListenerOptions(serve: Command): void {
  serve
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
    );
}

/** How changes go out (debounce, LEDS) and how the process's heap grows. */
function addPushOptions(serve: Command): void {
  serve
    .addOption(
      new Option(
        '--debounce-ms <n>',
        'merge the changes after a push this long before the next (default: server.debounceMs, else 100)',
      )
        .env('CANOPY_DEBOUNCE_MS')
        .argParser(intIn(0, 3_600_000)),
    )
    .addOption(
      new Option(
        '--xds-workers <n>',
        'worker threads that carry the xDS connections, e.g. the number of cores (default 1: the main thread alone)',
      )
        .env('CANOPY_XDS_WORKERS')
        .argParser(intIn(0, 256)),
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
    );
}

/** The log level and format. */
function addLogOptions(serve: Command): void {
  serve
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
    );
}

/** Starting against another replica's config (etcd) or a data directory that lost writes. */
function addRecoveryOptions(serve: Command): void {
  serve
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
}

/** The access-control flags (serve-security.ts parses them, env included). */
function addSecurityOptions(serve: Command): void {
  for (const [flag, spec] of Object.entries(SECURITY_FLAGS)) {
    const [help, env] = SECURITY_HELP[flag] ?? ['see docs/operations.md', ''];
    // Env is read by readServeSecurity (some variables hold lists or the token itself): named in the help only.
    const text = env ? `${help} (env: ${env})` : help;
    const option = spec.type === 'boolean' ? new Option(`--${flag}`, text) : new Option(`--${flag} <value>`, text);
    if ('multiple' in spec && spec.multiple)
      option.argParser((v: string, prev: string[] | undefined) => [...(prev ?? []), v]);
    serve.addOption(option);
  }
}

export interface ServeValues extends KubeValues {
  config?: string;
  dataDir: string;
  store?: string;
  host?: string;
  xdsHost?: string;
  adminHost?: string;
  xdsPort?: number;
  adminPort?: number;
  debounceMs?: number;
  xdsWorkers?: number;
  leds?: 'on' | 'off';
  heapGrowth: number;
  logLevel: string;
  logFormat?: 'pretty' | 'json';
  acceptStoreLoss?: boolean;
  takeOver?: boolean;
}
