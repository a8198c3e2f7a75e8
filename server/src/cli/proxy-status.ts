/**
 * `canopy proxy-status`: every client connected to a server, with SYNCED / STALE / NACKED per resource
 * type, read over CSDS from the xDS port (as `istioctl proxy-status` reads istiod).
 */
import { Option, type Command } from 'commander';
import { serviceOfName, shortDetail } from '../sessions/nack-report.js';
import type { CsdsClientConfig } from '../transport/csds-client.js';
import { adminToken, CliError, table } from './common.js';
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

export function registerProxyStatus(program: Command): void {
  program
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
    )
    .addOption(outputOption())
    .action(async (opts: { xds: string; tokenFile?: string; output: OutputFormat }) => {
      const token = adminToken(opts);
      const { fetchClientStatus } = await import('../transport/csds-client.js');
      let configs: CsdsClientConfig[];
      try {
        configs = await fetchClientStatus(opts.xds, token !== undefined ? { token } : {});
      } catch (err) {
        const e = err as { code?: number; details?: string; message: string };
        throw new CliError(
          `cannot read client status (CSDS) from ${opts.xds}: ${e.details ?? e.message} (--xds HOST:PORT)`,
        );
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
