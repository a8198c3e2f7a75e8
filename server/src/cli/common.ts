/**
 * What every subcommand shares: exit codes, the error that carries one, the version, and how an
 * operator command reaches a running server's admin API.
 */
import { readFileSync } from 'node:fs';
import { InvalidArgumentError, Option } from 'commander';
import { packagePath } from '../platform/paths.js';

export const EXIT_FAILURE = 1;
export const EXIT_USAGE = 2;

/** An error for the operator: printed as `canopy: message` (no stack), and the process exits with `exitCode`. */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: typeof EXIT_FAILURE | typeof EXIT_USAGE = EXIT_FAILURE,
  ) {
    super(message);
  }
}

export function packageVersion(): string {
  return (JSON.parse(readFileSync(packagePath('package.json'), 'utf8')) as { version: string }).version;
}

export const DEFAULT_ADMIN_URL = 'http://127.0.0.1:18080';

/**
 * `--admin`'s value: a URL (http:// or https://), or HOST:PORT as kubectl's --server and etcdctl's
 * --endpoints take it, meaning http://HOST:PORT. Read by the WHATWG URL parser; anything it does not
 * read back as given (a space, a stray character before "://") is a usage error naming the flag.
 */
export function adminUrl(raw: string): string {
  const bad = new InvalidArgumentError(
    'not a valid URL: expected http[s]://HOST:PORT (or HOST:PORT, meaning http://HOST:PORT).',
  );
  const hasScheme = raw.includes('://');
  let url: URL;
  try {
    url = new URL(hasScheme ? raw : `http://${raw}`);
  } catch {
    throw bad;
  }
  if ((url.protocol !== 'http:' && url.protocol !== 'https:') || url.hostname === '' || url.username) throw bad;
  // HOST:PORT is only a host and a port: "x/y" or "a b" would be read as a path or refused above.
  if (!hasScheme && url.host !== raw.toLowerCase().replace(/\/$/, '')) throw bad;
  return url.href;
}

/** `--admin URL` and `--token-file FILE` for commands that talk to a running server. */
export function adminOptions(defaultUrl: string | undefined = DEFAULT_ADMIN_URL): Option[] {
  const admin = new Option('--admin <url>', "the server's admin API: http[s]://HOST:PORT, or HOST:PORT")
    .env('CANOPY_ADMIN_URL')
    .argParser(adminUrl);
  return [
    defaultUrl === undefined ? admin : admin.default(defaultUrl),
    new Option(
      '--token-file <file>',
      'a file holding the admin token, sent as Authorization: Bearer (or the token itself in env CANOPY_ADMIN_TOKEN)',
    ).env('CANOPY_ADMIN_TOKEN_FILE'),
    ...tlsOptions(),
  ];
}

export function tlsOptions(): Option[] {
  return [
    new Option('--ca-file <file>', "the CA certificate (PEM) that signed the server's certificate").env(
      'CANOPY_CA_FILE',
    ),
    new Option('--cert-file <file>', 'a client certificate (PEM), for a server that requires one (--client-ca)').env(
      'CANOPY_CERT_FILE',
    ),
    new Option('--key-file <file>', "the client certificate's private key (PEM)").env('CANOPY_KEY_FILE'),
  ];
}

/** All of standard input, for `-f -`. */
export async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/** Writes `text` to `file` (-O, --out); a path that cannot be written is named with the reason. */
export async function writeOutput(file: string, text: string, flag: string): Promise<void> {
  const { writeFile } = await import('node:fs/promises');
  try {
    await writeFile(file, text);
  } catch (err) {
    throw new CliError(`cannot write ${flag} ${file}: ${(err as Error).message}`);
  }
}

/** The TLS flags of every command that talks to Canopy, admin API or xDS port. */
export interface ClientTlsFlags {
  readonly caFile?: string;
  readonly certFile?: string;
  readonly keyFile?: string;
}

export interface AdminTarget extends ClientTlsFlags {
  readonly admin: string;
  readonly tokenFile?: string;
}

/** The admin token: --token-file, else CANOPY_ADMIN_TOKEN, else none. */
export function adminToken(opts: { tokenFile?: string }): string | undefined {
  if (opts.tokenFile !== undefined) {
    try {
      return readFileSync(opts.tokenFile, 'utf8').trim();
    } catch (err) {
      throw new CliError(`cannot read --token-file ${opts.tokenFile}: ${(err as Error).message}`, EXIT_USAGE);
    }
  }
  return process.env['CANOPY_ADMIN_TOKEN'];
}

/** The server's error shape, `{ error: { code, message, fields? } }`, as lines for the operator. */
export function serverError(body: unknown): string {
  const e = (body as { error?: { code?: string; message?: string; fields?: { path: string; message: string }[] } })
    ?.error;
  if (!e) return JSON.stringify(body);
  const fields = (e.fields ?? []).map((f) => `\n  ${f.path || '(root)'}: ${f.message}`).join('');
  return `${e.code ? `[${e.code}] ` : ''}${e.message ?? ''}${fields}`;
}

/** Commander's parser for an integer flag in a range; a bad value is a usage error naming the flag. */
export function intIn(min: number, max: number): (raw: string) => number {
  return (raw) => {
    const n = Number(raw);
    if (!Number.isInteger(n) || n < min || n > max) {
      throw new InvalidArgumentError(`must be an integer in ${min}..${max}.`);
    }
    return n;
  };
}

/** Rows as an aligned text table (kubectl's shape: upper-case headers, two spaces between columns). */
export function table(headers: readonly string[], rows: readonly (readonly string[])[], withHeaders = true): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd();
  const lines = [...(withHeaders ? [line(headers)] : []), ...rows.map(line)];
  return lines.length === 0 ? '' : `${lines.join('\n')}\n`;
}
