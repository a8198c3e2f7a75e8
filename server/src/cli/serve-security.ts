/**
 * `canopy serve`'s access-control, TLS and request-limit flags: read from
 * flags and env, files loaded, bad values reported by flag name.
 */
import { readFile } from 'node:fs/promises';
import { formatFieldErrors } from '../domain/errors.js';
import { configFormatOf, parseConfigData } from '../config/config-text.js';
import { parseReadRules, type ReadRules } from '../transport/read-access.js';
import type { ServeSecurity, XdsLimitSettings } from '../security.js';

export const SECURITY_USAGE = `               [--admin-token-file FILE] [--admin-open-reads] [--admin-hostname NAME]... [--insecure-admin]
               [--tls-cert FILE --tls-key FILE] [--client-ca FILE] [--xds-read-rules FILE]
               [--admin-body-limit BYTES] [--admin-write-limit N]
               [--xds-max-streams-per-connection N] [--xds-max-names-per-connection N]
               [--xds-max-bytes-per-connection BYTES] [--xds-subscription-budget BYTES]`;
export const SECURITY_ENV =
  'CANOPY_ADMIN_TOKEN, CANOPY_ADMIN_TOKEN_FILE, CANOPY_ADMIN_OPEN_READS, CANOPY_ADMIN_HOSTNAMES, CANOPY_INSECURE_ADMIN,\n' +
  '     CANOPY_TLS_CERT, CANOPY_TLS_KEY, CANOPY_CLIENT_CA, CANOPY_ADMIN_BODY_LIMIT, CANOPY_ADMIN_WRITE_LIMIT,\n' +
  '     CANOPY_XDS_MAX_STREAMS_PER_CONNECTION, CANOPY_XDS_MAX_NAMES_PER_CONNECTION, CANOPY_XDS_MAX_BYTES_PER_CONNECTION,\n' +
  '     CANOPY_XDS_SUBSCRIPTION_BUDGET, CANOPY_XDS_READ_RULES';

export const SECURITY_FLAGS = {
  'admin-token-file': { type: 'string' },
  'admin-open-reads': { type: 'boolean' },
  'admin-hostname': { type: 'string', multiple: true },
  'insecure-admin': { type: 'boolean' },
  'tls-cert': { type: 'string' },
  'tls-key': { type: 'string' },
  'client-ca': { type: 'string' },
  'xds-read-rules': { type: 'string' },
  'admin-body-limit': { type: 'string' },
  'admin-write-limit': { type: 'string' },
  'xds-max-streams-per-connection': { type: 'string' },
  'xds-max-names-per-connection': { type: 'string' },
  'xds-max-bytes-per-connection': { type: 'string' },
  'xds-subscription-budget': { type: 'string' },
} as const;

export interface SecurityValues {
  'admin-token-file'?: string;
  'admin-open-reads'?: boolean;
  'admin-hostname'?: string[];
  'insecure-admin'?: boolean;
  'tls-cert'?: string;
  'tls-key'?: string;
  'client-ca'?: string;
  'xds-read-rules'?: string;
  'admin-body-limit'?: string;
  'admin-write-limit'?: string;
  'xds-max-streams-per-connection'?: string;
  'xds-max-names-per-connection'?: string;
  'xds-max-bytes-per-connection'?: string;
  'xds-subscription-budget'?: string;
}

export type { ServeSecurity, XdsLimitSettings } from '../security.js';

export class FlagError extends Error {}

const truthy = (v: string | undefined) => v !== undefined && /^(1|true|yes)$/i.test(v);

export async function readServeSecurity(values: SecurityValues, env: NodeJS.ProcessEnv): Promise<ServeSecurity> {
  const tokenFile = values['admin-token-file'] ?? env['CANOPY_ADMIN_TOKEN_FILE'];
  let adminToken = env['CANOPY_ADMIN_TOKEN'];
  if (tokenFile !== undefined) adminToken = (await readFlagFile('admin-token-file', tokenFile)).toString('utf8').trim();
  if (adminToken !== undefined && adminToken.length < 16) {
    throw new FlagError('the admin token (--admin-token-file or CANOPY_ADMIN_TOKEN) must be at least 16 characters');
  }
  const certFile = values['tls-cert'] ?? env['CANOPY_TLS_CERT'];
  const keyFile = values['tls-key'] ?? env['CANOPY_TLS_KEY'];
  const caFile = values['client-ca'] ?? env['CANOPY_CLIENT_CA'];
  if ((certFile === undefined) !== (keyFile === undefined)) throw new FlagError('--tls-cert and --tls-key go together');
  if (caFile !== undefined && certFile === undefined) throw new FlagError('--client-ca needs --tls-cert and --tls-key');
  const tls =
    certFile !== undefined && keyFile !== undefined
      ? {
          cert: await readFlagFile('tls-cert', certFile),
          key: await readFlagFile('tls-key', keyFile),
          ...(caFile !== undefined ? { clientCa: await readFlagFile('client-ca', caFile) } : {}),
        }
      : undefined;
  const rulesFile = values['xds-read-rules'] ?? env['CANOPY_XDS_READ_RULES'];
  if (rulesFile !== undefined && caFile === undefined) {
    throw new FlagError('--xds-read-rules needs --client-ca: clients are told apart by their certificates');
  }
  const xdsReadRules = rulesFile !== undefined ? await readRulesFile(rulesFile) : undefined;
  const adminBodyLimit = positive('admin-body-limit', values['admin-body-limit'] ?? env['CANOPY_ADMIN_BODY_LIMIT']);
  const adminWriteLimit = positive('admin-write-limit', values['admin-write-limit'] ?? env['CANOPY_ADMIN_WRITE_LIMIT']);
  const xdsLimits: XdsLimitSettings = {};
  const limit = (flag: keyof SecurityValues, envName: string, parse: typeof positive) =>
    parse(flag, (values[flag] as string | undefined) ?? env[envName]);
  const streams = limit('xds-max-streams-per-connection', 'CANOPY_XDS_MAX_STREAMS_PER_CONNECTION', positive);
  const names = limit('xds-max-names-per-connection', 'CANOPY_XDS_MAX_NAMES_PER_CONNECTION', positive);
  const perConnection = limit('xds-max-bytes-per-connection', 'CANOPY_XDS_MAX_BYTES_PER_CONNECTION', byteSize);
  const budget = limit('xds-subscription-budget', 'CANOPY_XDS_SUBSCRIPTION_BUDGET', byteSize);
  if (streams !== undefined) xdsLimits.maxStreamsPerConnection = streams;
  if (names !== undefined) xdsLimits.maxNamesPerConnection = names;
  if (perConnection !== undefined) xdsLimits.maxBytesPerConnection = perConnection;
  if (budget !== undefined) xdsLimits.subscriptionBudgetBytes = budget;
  return {
    ...(Object.keys(xdsLimits).length > 0 ? { xdsLimits } : {}),
    ...(xdsReadRules ? { xdsReadRules } : {}),
    ...(adminToken !== undefined ? { adminToken } : {}),
    ...(tokenFile !== undefined ? { adminTokenFile: tokenFile } : {}),
    adminOpenReads: values['admin-open-reads'] ?? truthy(env['CANOPY_ADMIN_OPEN_READS']),
    adminHostnames: values['admin-hostname'] ?? env['CANOPY_ADMIN_HOSTNAMES']?.split(',').filter(Boolean) ?? [],
    insecureAdmin: values['insecure-admin'] ?? truthy(env['CANOPY_INSECURE_ADMIN']),
    ...(tls ? { tls } : {}),
    ...(adminBodyLimit !== undefined ? { adminBodyLimit } : {}),
    ...(adminWriteLimit !== undefined ? { adminWriteLimit } : {}),
  };
}

async function readRulesFile(file: string): Promise<ReadRules> {
  const text = (await readFlagFile('xds-read-rules', file)).toString('utf8');
  const parsed = parseConfigData(text, configFormatOf(file));
  const rules = parsed.ok ? parseReadRules(parsed.value) : parsed;
  if (!rules.ok) throw new FlagError(`--xds-read-rules ${file}: ${formatFieldErrors(rules.errors)}`);
  return rules.value;
}

async function readFlagFile(flag: string, file: string): Promise<Buffer> {
  try {
    return await readFile(file);
  } catch (err) {
    throw new FlagError(`--${flag}: cannot read ${file}: ${(err as Error).message}`);
  }
}

function positive(flag: string, raw: string | undefined): number | undefined {
  if (raw === undefined) return undefined;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1) throw new FlagError(`--${flag} must be a positive integer, got "${raw}"`);
  return n;
}

const UNITS: Readonly<Record<string, number>> = { '': 1, KiB: 1024, MiB: 1024 ** 2, GiB: 1024 ** 3 };

/** A positive byte count: an integer, optionally with KiB, MiB or GiB. */
function byteSize(flag: string, raw: string | undefined): number | undefined {
  if (raw === undefined) return undefined;
  const m = /^(\d+)\s*(KiB|MiB|GiB)?$/.exec(raw.trim());
  const n = m ? Number(m[1]) * UNITS[m[2] ?? '']! : NaN;
  if (!Number.isSafeInteger(n) || n < 1) {
    throw new FlagError(`--${flag} must be a positive number of bytes (optionally with KiB, MiB or GiB), got "${raw}"`);
  }
  return n;
}
