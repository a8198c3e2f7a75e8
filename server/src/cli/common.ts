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

/** `--admin URL` and `--token-file FILE` for commands that talk to a running server. */
export function adminOptions(): Option[] {
  return [
    new Option('--admin <url>', "the server's admin API").env('CANOPY_ADMIN_URL').default(DEFAULT_ADMIN_URL),
    new Option('--token-file <file>', 'a file holding the admin token (sent as Authorization: Bearer)').env(
      'CANOPY_ADMIN_TOKEN_FILE',
    ),
  ];
}

export interface AdminTarget {
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

/** Why a request never reached the server, from undici's error cause (ECONNREFUSED, ENOTFOUND, a timeout). */
function unreachable(url: URL, err: unknown): CliError {
  type Cause = { code?: string; message?: string; errors?: Cause[] };
  const outer = (err as { cause?: Cause }).cause;
  // Node tries each address of a name in turn: the first attempt's error says why.
  const cause = outer?.code === undefined && outer?.errors?.[0] ? outer.errors[0] : outer;
  const why = cause?.code
    ? `${cause.code}${cause.message ? `: ${cause.message}` : ''}`
    : (cause?.message ?? (err as Error).message);
  return new CliError(
    `cannot reach the Canopy admin API at ${url.href}: ${why} (is \`canopy serve\` running? --admin URL)`,
  );
}

/** fetch against the admin API; a server that is down or unreachable is a CliError naming the URL and why. */
export async function adminFetch(url: URL, init: RequestInit = {}, token?: string): Promise<Response> {
  const headers = new Headers(init.headers);
  if (token !== undefined) headers.set('authorization', `Bearer ${token}`);
  try {
    return await fetch(url, { ...init, headers, signal: init.signal ?? AbortSignal.timeout(10_000) });
  } catch (err) {
    throw unreachable(url, err);
  }
}

/** GET a JSON document from the admin API; an error answer is a CliError with the server's message. */
export async function adminJson<T>(
  target: AdminTarget,
  path: string,
  init: RequestInit = {},
): Promise<{ status: number; body: T }> {
  const url = new URL(path, target.admin);
  const res = await adminFetch(url, init, adminToken(target));
  const text = await res.text();
  let body: unknown;
  try {
    body = text ? JSON.parse(text) : undefined;
  } catch {
    throw new CliError(`${url.href} answered ${res.status} with a body that is not JSON`);
  }
  return { status: res.status, body: body as T };
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
export function table(headers: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd();
  return [line(headers), ...rows.map(line)].join('\n') + '\n';
}
