/**
 * `canopy proxy-status`: every client connected to a server, with SYNCED / STALE / NACKED per resource
 * type, read over CSDS from the xDS port (as `istioctl proxy-status` reads istiod).
 */
import { Option, type Command } from 'commander';
import { serviceOfName, shortDetail } from '../sessions/nack-report.js';
import type { CsdsClientConfig } from '../transport/csds-client.js';
import { readClientTls, tlsFix, unauthorized } from './admin-client.js';
import { adminToken, CliError, table, tlsOptions, type ClientTlsFlags } from './common.js';
import { outputOption, print, type OutputFormat } from './output.js';

/** Column order and names, as istioctl shows them. */
const TYPES: readonly [string, string][] = [
  ['envoy.config.listener.v3.Listener', 'LDS'],
  ['envoy.config.route.v3.RouteConfiguration', 'RDS'],
  ['envoy.config.cluster.v3.Cluster', 'CDS'],
  ['envoy.config.endpoint.v3.ClusterLoadAssignment', 'EDS'],
  ['envoy.config.endpoint.v3.LbEndpoint', 'LEDS'],
  ['canopy.v1.LocalityTree', 'TREES'],
];

export type SyncState = 'SYNCED' | 'STALE' | 'NACKED' | '-';

export interface ProxyStatus {
  readonly node: string;
  readonly cluster: string;
  readonly locality: string;
  readonly types: Record<string, SyncState>;
  /** Each resource the client refused: its type, name, service and the client's error detail. */
  readonly nacked: readonly NackedResource[];
}

export interface NackedResource {
  readonly type: string;
  readonly resource: string;
  readonly service: string;
  readonly detail: string;
}

type Options = ClientTlsFlags & { xds: string; tokenFile?: string; output: OutputFormat };

export function registerProxyStatus(program: Command): void {
  const cmd = program
    .command('proxy-status')
    .alias('ps')
    .description('every connected client with SYNCED / STALE / NACKED per type (from CSDS on the xDS port)')
    .addOption(
      new Option('--xds <host:port>', "the server's xDS address").env('CANOPY_XDS_ADDRESS').default('127.0.0.1:18000'),
    )
    .addOption(
      new Option('--token-file <file>', 'a file holding the admin token (sent as authorization: Bearer)').env(
        'CANOPY_ADMIN_TOKEN_FILE',
      ),
    );
  for (const o of tlsOptions()) cmd.addOption(o);
  cmd.addOption(outputOption()).action(async (opts: Options) => {
    const token = adminToken(opts);
    // TLS when the command is given a CA or a client certificate: the xDS port is plaintext or TLS, not both.
    const tls = opts.caFile !== undefined || opts.certFile !== undefined ? readClientTls(opts) : undefined;
    // grpc-js names the server by its address in TLS's SNI, which Node warns about for an IP on every call.
    if (tls) process.noDeprecation = true;
    const { fetchClientStatus } = await import('../transport/csds-client.js');
    let configs: CsdsClientConfig[];
    try {
      configs = await fetchClientStatus(opts.xds, {
        ...(token !== undefined ? { token } : {}),
        ...(tls ? { tls } : {}),
      });
    } catch (err) {
      throw csdsFailure(opts, err, token);
    }
    const rows = proxyStatus(configs);
    print(opts.output, { proxies: rows }, () => {
      const out = table(
        ['NODE', 'CLUSTER', 'LOCALITY', ...TYPES.map(([, short]) => short)],
        rows.map((r) => [r.node, r.cluster || '-', r.locality || '-', ...TYPES.map(([, short]) => r.types[short]!)]),
      );
      const nacked = rows.flatMap((r) => r.nacked.map((n) => [r.node, n.type, n.service, n.resource, n.detail]));
      if (nacked.length === 0) return out;
      return `${out}\n${table(['NODE', 'TYPE', 'SERVICE', 'RESOURCE', 'ERROR (the client keeps what it last acknowledged)'], nacked)}`;
    });
  });
}

/** Why CSDS failed, with the fix: the flag for the xDS port, the CA, the client certificate or the token. */
function csdsFailure(opts: Options, err: unknown, token: string | undefined): CliError {
  const e = err as { code?: number; details?: string; message: string };
  // grpc-js appends an empty "Resolution note:" and OpenSSL's source position: neither helps an operator.
  const details = (e.details ?? e.message)
    .replace(/\s*\(?\d{4}-\d\d-\d\dT[\d:.]+Z\)?/g, '')
    .replace(/\s*Resolution note:.*$/s, '')
    .replace(/:\.\.\/deps\/openssl\S*/g, '')
    .replace(/\s+/g, ' ')
    .trim();
  const where = `cannot read client status (CSDS) from ${opts.xds}`;
  // A missing token is UNAUTHENTICATED; a wrong one PERMISSION_DENIED (docs/security.md, CSDS).
  if (e.code === UNAUTHENTICATED || (e.code === PERMISSION_DENIED && token !== undefined && /token/i.test(details)))
    return unauthorized(`the xDS port ${opts.xds}`, opts, token);
  // An HTTP/1 server (the admin port, a web server) answers gRPC's HTTP/2 preface with bytes that are no frame.
  if (/Protocol error|Received HTTP status code|HTTP\/1|no application protocol|alert number 120/i.test(details))
    return new CliError(
      `${where}: it does not speak gRPC (is it the admin port?); give the xDS port with --xds HOST:PORT (default 127.0.0.1:18000, env CANOPY_XDS_ADDRESS)`,
    );
  const code = /\b([A-Z][A-Z_]{6,})\b/.exec(details)?.[1];
  const fix = tlsFix(code, details, opts);
  if (fix !== undefined) return new CliError(`${where}: ${details}; ${fix}`);
  if (opts.caFile === undefined && /Failed to connect|Connection dropped|ECONNRESET|socket hang up/i.test(details))
    return new CliError(`${where}: ${details} (if the server has TLS on, give --ca-file FILE; --xds HOST:PORT)`);
  return new CliError(`${where}: ${details} (--xds HOST:PORT)`);
}

/** gRPC's status code for a missing or refused token. */
const UNAUTHENTICATED = 16;
const PERMISSION_DENIED = 7;

/**
 * Per node and type: NACKED if the client rejected any resource, STALE if any was sent and not yet
 * acknowledged (or requested and not yet sent), SYNCED when every one is acknowledged, "-" for a type
 * the client does not use.
 */
export function proxyStatus(configs: readonly CsdsClientConfig[]): ProxyStatus[] {
  return configs
    .map((c) => {
      const types: Record<string, SyncState> = {};
      const nacked: NackedResource[] = [];
      for (const [url, short] of TYPES) {
        const mine = c.generic_xds_configs.filter((r) => r.type_url.endsWith(url));
        types[short] =
          mine.length === 0
            ? '-'
            : mine.some((r) => r.client_status === 'NACKED' || r.config_status === 'ERROR')
              ? 'NACKED'
              : mine.every((r) => r.client_status === 'ACKED' || r.client_status === 'DOES_NOT_EXIST')
                ? 'SYNCED'
                : 'STALE';
        for (const r of mine) {
          if (r.client_status !== 'NACKED') continue;
          const detail = shortDetail(r.error_state?.details ?? '');
          nacked.push({ type: short, resource: r.name, service: serviceOfName(r.name), detail });
        }
      }
      const l = c.node.locality ?? {};
      return {
        node: c.node.id,
        cluster: c.node.cluster,
        locality: [l['region'], l['zone'], l['sub_zone']].filter(Boolean).join('/'),
        types,
        nacked,
      };
    })
    .sort((a, b) => a.node.localeCompare(b.node));
}
