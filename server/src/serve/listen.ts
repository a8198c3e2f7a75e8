/**
 * Where the two listeners bind: flags over the config's `server` section over
 * the defaults, and the refusal to expose the admin API off loopback without
 * a token.
 */
import ipaddr from 'ipaddr.js';
import type { CanopyOptions } from './options.js';
import { CodedError } from '../domain/errors.js';

export const DEFAULT_XDS_PORT = 18000;
export const DEFAULT_ADMIN_PORT = 18080;

export interface Listeners {
  readonly xdsHost: string;
  readonly xdsPort: number;
  readonly adminHost: string;
  readonly adminPort: number;
}

export function listeners(opts: CanopyOptions): Listeners {
  const server = opts.config.server;
  const host = opts.host ?? server.host ?? '127.0.0.1';
  const adminHost = opts.adminHost ?? host;
  const security = opts.security ?? {};
  if (!isLoopback(adminHost) && security.adminToken === undefined && !security.insecureAdmin) {
    throw new CodedError(
      'CANOPY_BAD_OPTION',
      `refusing to serve the admin API on ${adminHost} without a token: anyone who can reach it could rewrite the mesh. ` +
        'Give --admin-token-file FILE (or CANOPY_ADMIN_TOKEN), bind it to loopback with --admin-host 127.0.0.1, ' +
        'or accept the risk with --insecure-admin',
    );
  }
  return {
    xdsHost: opts.xdsHost ?? host,
    xdsPort: opts.xdsPort ?? server.xdsPort ?? DEFAULT_XDS_PORT,
    adminHost,
    adminPort: opts.adminPort ?? server.adminPort ?? DEFAULT_ADMIN_PORT,
  };
}

function isLoopback(host: string): boolean {
  if (host === 'localhost') return true;
  return ipaddr.isValid(host) && ipaddr.process(host).range() === 'loopback';
}

/** The web view's URL; a wildcard listen address is reached through loopback. */
export function webViewUrl(adminHost: string, port: number, tls: boolean): string {
  const host = adminHost === '0.0.0.0' ? '127.0.0.1' : adminHost === '::' ? '::1' : adminHost;
  return `${tls ? 'https' : 'http'}://${hostForUrl(host)}:${port}/ui/`;
}

/** `host:port` as a URL writes it (an IPv6 address in brackets). */
export function hostForUrl(host: string): string {
  return host.includes(':') ? `[${host}]` : host;
}
