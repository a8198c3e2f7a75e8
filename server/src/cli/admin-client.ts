/**
 * How an operator command reaches a running server's admin API: one HTTP(S) request with the CA and
 * client certificate the command was given (--ca-file, --cert-file, --key-file), and an error that
 * names the fix when it fails: the flag to set, and whether a write may have been made.
 * node:https rather than fetch: fetch takes no CA of its own (only NODE_EXTRA_CA_CERTS, for the process).
 */
import { readFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import { adminToken, CliError, EXIT_USAGE, type AdminTarget, type ClientTlsFlags } from './common.js';

export interface ClientTls {
  readonly ca?: Buffer;
  readonly cert?: Buffer;
  readonly key?: Buffer;
}

function readFlagFile(flag: string, file: string): Buffer {
  try {
    return readFileSync(file);
  } catch (err) {
    throw new CliError(`cannot read ${flag} ${file}: ${(err as Error).message}`, EXIT_USAGE);
  }
}

/** The files the flags name, read; a client certificate without its key (or the reverse) is a usage error. */
export function readClientTls(flags: ClientTlsFlags): ClientTls {
  if ((flags.certFile === undefined) !== (flags.keyFile === undefined))
    throw new CliError('--cert-file and --key-file go together (or CANOPY_CERT_FILE and CANOPY_KEY_FILE)', EXIT_USAGE);
  return {
    ...(flags.caFile !== undefined ? { ca: readFlagFile('--ca-file', flags.caFile) } : {}),
    ...(flags.certFile !== undefined ? { cert: readFlagFile('--cert-file', flags.certFile) } : {}),
    ...(flags.keyFile !== undefined ? { key: readFlagFile('--key-file', flags.keyFile) } : {}),
  };
}

/** OpenSSL's verdicts on a certificate chain it cannot trust: the fix is the CA. */
const UNTRUSTED = new Set([
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'CERT_SIGNATURE_FAILURE',
  'CERT_UNTRUSTED',
]);

/** What to do about a TLS failure, or undefined when the error is not one. */
export function tlsFix(code: string | undefined, message: string, flags: ClientTlsFlags): string | undefined {
  if (code !== undefined && UNTRUSTED.has(code))
    return flags.caFile === undefined
      ? "give the CA that signed the server's certificate with --ca-file FILE (or CANOPY_CA_FILE)"
      : `the server's certificate is not signed by --ca-file ${flags.caFile}`;
  if (code === 'ERR_TLS_CERT_ALTNAME_INVALID')
    return "the server's certificate is not for this name: use a host name or address it lists";
  if (code === 'CERT_HAS_EXPIRED' || code === 'CERT_NOT_YET_VALID') return "the server's certificate is out of date";
  if (/certificate required|alert number 116/i.test(message))
    return 'the server requires a client certificate: give --cert-file FILE and --key-file FILE';
  return undefined;
}

export interface AdminRequest {
  readonly method?: string;
  readonly body?: string;
  readonly headers?: Record<string, string>;
}

/** Why a request failed; `sent` when it had reached the server whole (so a write may have been made). */
export class RequestFailed extends CliError {
  constructor(
    message: string,
    readonly sent: boolean,
  ) {
    super(message);
  }
}

/** One request to the admin API; a server that is down, unreachable or untrusted is a RequestFailed naming the fix. */
export function adminRequest(
  url: URL,
  init: AdminRequest,
  token: string | undefined,
  flags: ClientTlsFlags,
): Promise<{ status: number; text: string }> {
  const tls = url.protocol === 'https:' ? readClientTls(flags) : {};
  const headers: Record<string, string> = { ...init.headers };
  if (token !== undefined) {
    if (!/^[\x21-\x7e]+$/.test(token))
      throw new CliError(
        'the admin token (--token-file or CANOPY_ADMIN_TOKEN) must be one word of printable ASCII',
        EXIT_USAGE,
      );
    headers['authorization'] = `Bearer ${token}`;
  }
  return new Promise((resolve, reject) => {
    let sent = false;
    const req = (url.protocol === 'https:' ? https : http).request(
      url,
      { method: init.method ?? 'GET', headers, timeout: 10_000, ...tls },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', (err) => reject(failure(url, err, true, flags)));
      },
    );
    req.on('finish', () => (sent = true));
    req.on('timeout', () => {
      reject(failure(url, { code: 'ETIMEDOUT', message: 'no answer in 10 s', name: 'timeout' }, sent, flags));
      req.destroy();
    });
    req.on('error', (err) => reject(failure(url, err, sent, flags)));
    req.end(init.body);
  });
}

function failure(url: URL, err: NodeJS.ErrnoException, sent: boolean, flags: ClientTlsFlags): RequestFailed {
  const why = `${err.code ? `${err.code}: ` : ''}${err.message}`;
  const fix = tlsFix(err.code, err.message, flags);
  if (fix !== undefined)
    return new RequestFailed(`cannot trust the Canopy admin API at ${url.href}: ${why}; ${fix}`, false);
  if (sent) return new RequestFailed(`the Canopy admin API at ${url.href} went away before it answered: ${why}`, true);
  return new RequestFailed(
    `cannot reach the Canopy admin API at ${url.href}: ${why} (is \`canopy serve\` running? --admin URL)`,
    false,
  );
}

/** A JSON document from the admin API; a 401 names the token flags, whether a token was sent or not. */
export async function adminJson<T>(
  target: AdminTarget,
  path: string,
  init: AdminRequest = {},
): Promise<{ status: number; body: T }> {
  const url = new URL(path, target.admin);
  const token = adminToken(target);
  const res = await adminRequest(url, init, token, target);
  if (res.status === 401) throw unauthorized(url, target, token);
  let body: unknown;
  try {
    body = res.text ? JSON.parse(res.text) : undefined;
  } catch {
    throw new CliError(`${url.href} answered ${res.status} with a body that is not JSON`);
  }
  return { status: res.status, body: body as T };
}

/** A missing token and a wrong one read differently: the fix differs. */
export function unauthorized(url: URL | string, target: { tokenFile?: string }, token: string | undefined): CliError {
  const where = typeof url === 'string' ? url : url.origin;
  if (token === undefined)
    return new CliError(
      `${where} needs the admin token (401): give --token-file FILE, or set CANOPY_ADMIN_TOKEN to the token` +
        ' (the one the server reads from its --admin-token-file or CANOPY_ADMIN_TOKEN)',
    );
  const from = target.tokenFile !== undefined ? `--token-file ${target.tokenFile}` : 'CANOPY_ADMIN_TOKEN';
  return new CliError(
    `${where} refused the admin token from ${from} (401): it is not the server's token` +
      " (check the server's --admin-token-file or CANOPY_ADMIN_TOKEN)",
  );
}
