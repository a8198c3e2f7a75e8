/**
 * `canopy serve`'s access-control, TLS and request-limit flags: read from
 * flags and env, files loaded, bad values reported by flag name.
 */
import { readFile } from 'node:fs/promises';

export const SECURITY_USAGE = `               [--admin-token-file FILE] [--admin-open-reads] [--admin-hostname NAME]... [--insecure-admin]
               [--tls-cert FILE --tls-key FILE] [--client-ca FILE]
               [--admin-body-limit BYTES] [--admin-write-limit N]`;
export const SECURITY_ENV =
  'CANOPY_ADMIN_TOKEN, CANOPY_ADMIN_TOKEN_FILE, CANOPY_ADMIN_OPEN_READS, CANOPY_ADMIN_HOSTNAMES, CANOPY_INSECURE_ADMIN,\n' +
  '     CANOPY_TLS_CERT, CANOPY_TLS_KEY, CANOPY_CLIENT_CA, CANOPY_ADMIN_BODY_LIMIT, CANOPY_ADMIN_WRITE_LIMIT';

export const SECURITY_FLAGS = {
  'admin-token-file': { type: 'string' },
  'admin-open-reads': { type: 'boolean' },
  'admin-hostname': { type: 'string', multiple: true },
  'insecure-admin': { type: 'boolean' },
  'tls-cert': { type: 'string' },
  'tls-key': { type: 'string' },
  'client-ca': { type: 'string' },
  'admin-body-limit': { type: 'string' },
  'admin-write-limit': { type: 'string' },
} as const;

export interface SecurityValues {
  'admin-token-file'?: string;
  'admin-open-reads'?: boolean;
  'admin-hostname'?: string[];
  'insecure-admin'?: boolean;
  'tls-cert'?: string;
  'tls-key'?: string;
  'client-ca'?: string;
  'admin-body-limit'?: string;
  'admin-write-limit'?: string;
}

export interface ServeSecurity {
  readonly adminToken?: string;
  readonly adminOpenReads: boolean;
  readonly adminHostnames: readonly string[];
  readonly insecureAdmin: boolean;
  /** PEM cert and key for both listeners; clientCa turns on mTLS for xDS. */
  readonly tls?: { readonly cert: Buffer; readonly key: Buffer; readonly clientCa?: Buffer };
  readonly adminBodyLimit?: number;
  readonly adminWriteLimit?: number;
}

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
  const adminBodyLimit = positive('admin-body-limit', values['admin-body-limit'] ?? env['CANOPY_ADMIN_BODY_LIMIT']);
  const adminWriteLimit = positive('admin-write-limit', values['admin-write-limit'] ?? env['CANOPY_ADMIN_WRITE_LIMIT']);
  return {
    ...(adminToken !== undefined ? { adminToken } : {}),
    adminOpenReads: values['admin-open-reads'] ?? truthy(env['CANOPY_ADMIN_OPEN_READS']),
    adminHostnames: values['admin-hostname'] ?? (env['CANOPY_ADMIN_HOSTNAMES']?.split(',').filter(Boolean) ?? []),
    insecureAdmin: values['insecure-admin'] ?? truthy(env['CANOPY_INSECURE_ADMIN']),
    ...(tls ? { tls } : {}),
    ...(adminBodyLimit !== undefined ? { adminBodyLimit } : {}),
    ...(adminWriteLimit !== undefined ? { adminWriteLimit } : {}),
  };
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
