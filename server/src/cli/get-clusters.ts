/** `canopy get clusters [NAME]`: the Kubernetes clusters a running server watches, and which is stale since when. */
import { adminJson } from './admin-client.js';
import { CliError, serverError, type AdminTarget } from './common.js';
import { printList, type PrintOptions } from './output.js';

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

export async function getClusters(opts: AdminTarget & PrintOptions, name?: string): Promise<void> {
  const { status, body } = await adminJson<{ clusters: ClusterJson[] }>(opts, '/api/v1/clusters');
  if (status !== 200) throw new CliError(`GET /api/v1/clusters: ${status} ${serverError(body)}`);
  const clusters = name === undefined ? body.clusters : body.clusters.filter((c) => c.name === name);
  if (name !== undefined && clusters.length === 0) throw new CliError(`no cluster "${name}"`);
  printList(opts, { clusters }, () => ({
    headers: ['CLUSTER', 'NETWORK', 'SYNCED', 'STATE', 'SERVICES', 'ENDPOINTS'],
    rows: clusters.map((c) => [
      c.name,
      c.network || '-',
      c.synced ? 'yes' : 'no',
      c.connected ? 'connected' : `stale since ${c.staleSince ?? '?'}`,
      String(c.services),
      String(c.endpoints),
    ]),
    wideHeaders: ['SERVER'],
    wideRows: clusters.map((c) => [c.server || '-']),
    names: clusters.map((c) => `cluster/${c.name}`),
  }));
}
