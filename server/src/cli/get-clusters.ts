/** `canopy get clusters`: the Kubernetes clusters a running server watches, and which is stale since when. */
import { adminJson, CliError, serverError, table, type AdminTarget } from './common.js';
import { print, type OutputFormat } from './output.js';

interface ClusterJson {
  name: string;
  network: string;
  server: string;
  synced: boolean;
  connected: boolean;
  staleSince?: string;
  services: number;
  endpoints: number;
}

export async function getClusters(opts: AdminTarget & { output: OutputFormat }): Promise<void> {
  const { status, body } = await adminJson<{ clusters: ClusterJson[] }>(opts, '/api/v1/clusters');
  if (status !== 200) throw new CliError(`GET /api/v1/clusters: ${status} ${serverError(body)}`);
  const { clusters } = body;
  print(opts.output, { clusters }, () =>
    table(
      ['CLUSTER', 'NETWORK', 'SYNCED', 'STATE', 'SERVICES', 'ENDPOINTS', 'SERVER'],
      clusters.map((c) => [
        c.name,
        c.network || '-',
        c.synced ? 'yes' : 'no',
        c.connected ? 'connected' : `stale since ${c.staleSince ?? '?'}`,
        String(c.services),
        String(c.endpoints),
        c.server || '-',
      ]),
    ),
  );
}
