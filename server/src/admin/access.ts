/**
 * Who may do what on the admin port, checked in one onRequest hook before a
 * body is read, so a refused request changes nothing:
 *
 * - /healthz, /readyz and /metrics are always open (probes, scrapers), and so
 *   is the web view's bundle (/, /ui/, its script and style: no data in them,
 *   and a browser cannot add a header to a navigation); its JSON (/ui/api/…)
 *   is a read like /debug;
 * - writes need `Authorization: Bearer <token>` when a token is configured,
 *   and reads of /api and /debug too unless reads are left open;
 * - requests (reads as well as writes) whose Host header is a DNS name the
 *   server was not told to answer to are refused (DNS rebinding: a web page's
 *   script reaching a loopback admin port through an attacker's name, then
 *   reading the mesh or writing it). IP literals and `localhost` are always
 *   accepted: rebinding needs a name. Probes, metrics and the web view's
 *   bundle stay open: they carry no mesh data.
 * - a token given as a file is re-read when the file changes (rotation
 *   without a restart): the new token is accepted and the old one refused
 *   within about a second; an unreadable or too short new file keeps the
 *   previous token and is logged.
 */
import { timingSafeEqual } from 'node:crypto';
import { unwatchFile, watchFile } from 'node:fs';
import { readFile } from 'node:fs/promises';
import type { FastifyBaseLogger, FastifyInstance, FastifyRequest } from 'fastify';
import ipaddr from 'ipaddr.js';
import { CanopyError } from '../domain/errors.js';

export interface AccessPolicy {
  /** When set, the bearer token writes (and, unless openReads, reads) need. */
  readonly token?: string;
  /** The file `token` was read from: re-read when it changes. */
  readonly tokenFile?: string;
  /** With a token: leave GETs of /api and /debug open. */
  readonly openReads?: boolean;
  /** DNS names, besides IP literals and localhost, that requests may carry in Host. */
  readonly hostnames?: readonly string[];
}

const OPEN = new Set([
  '/healthz',
  '/readyz',
  '/metrics',
  '/',
  '/ui',
  '/ui/',
  '/ui/index.html',
  '/ui/app.js',
  '/ui/app.css',
]);

export function isWrite(req: FastifyRequest): boolean {
  return req.method !== 'GET' && req.method !== 'HEAD' && req.method !== 'OPTIONS';
}

/** The shortest admin token accepted (as at startup). */
export const MIN_TOKEN_LENGTH = 16;
/** How often a token file is checked for a change. */
const TOKEN_FILE_POLL_MS = 1000;

export function registerAccessControl(app: FastifyInstance, policy: AccessPolicy, log?: FastifyBaseLogger): void {
  const hostnames = new Set((policy.hostnames ?? []).map((h) => h.toLowerCase()));
  let token = policy.token !== undefined ? Buffer.from(policy.token) : undefined;
  if (policy.tokenFile !== undefined && token !== undefined) {
    const file = policy.tokenFile;
    const reload = () => {
      readFile(file, 'utf8').then(
        (text) => {
          const next = text.trim();
          if (next.length < MIN_TOKEN_LENGTH) {
            log?.error(
              { file },
              `the new admin token is shorter than ${MIN_TOKEN_LENGTH} characters: the previous one stays`,
            );
          } else if (!token?.equals(Buffer.from(next))) {
            token = Buffer.from(next);
            log?.warn({ file }, 'admin token file changed: the new token is in force');
          }
        },
        (err: Error) => log?.error({ file, err: err.message }, 'admin token file unreadable: the previous token stays'),
      );
    };
    // Polling stat follows renames and symlink swaps (Kubernetes secrets), which fs.watch may miss.
    watchFile(file, { interval: TOKEN_FILE_POLL_MS, persistent: false }, reload);
    app.addHook('onClose', async () => unwatchFile(file, reload));
  }
  app.addHook('onRequest', async (req, reply) => {
    const path = req.url.split('?', 1)[0] ?? '';
    const write = isWrite(req);
    if (OPEN.has(path) && !write) return;
    if (!hostAllowed(req.headers.host, hostnames)) {
      throw new CanopyError(
        'CANOPY_MISDIRECTED',
        `this admin server does not answer to Host "${req.headers.host ?? ''}" (add it with --admin-hostname)`,
      );
    }
    if (token === undefined || (!write && policy.openReads)) return;
    if (!bearerMatches(req.headers.authorization, token)) {
      void reply.header('www-authenticate', 'Bearer realm="canopy-admin"');
      throw new CanopyError('CANOPY_UNAUTHORIZED', 'a valid "Authorization: Bearer <token>" header is required');
    }
  });
}

function hostAllowed(host: string | undefined, names: ReadonlySet<string>): boolean {
  if (host === undefined) return false;
  // host[:port], with an IPv6 literal in brackets.
  const name = host.startsWith('[') ? host.slice(1, host.indexOf(']')) : (host.split(':', 1)[0] ?? '');
  const lower = name.toLowerCase();
  return lower === 'localhost' || ipaddr.isValid(name) || names.has(lower);
}

function bearerMatches(header: string | undefined, token: Buffer): boolean {
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header ?? '');
  if (!m?.[1]) return false;
  const given = Buffer.from(m[1]);
  return given.length === token.length && timingSafeEqual(given, token);
}
