/**
 * Whether a client is in step with a Canopy replica again after a fault: its node is on an ADS stream
 * there, every resource it holds of each type named is acknowledged, and nothing was rejected.
 */
type Obj = Record<string, unknown>;

export const CDS = 'type.googleapis.com/envoy.config.cluster.v3.Cluster';
export const LDS = 'type.googleapis.com/envoy.config.listener.v3.Listener';
export const EDS = 'type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment';

export interface SyncState {
  readonly synced: boolean;
  readonly nacks: readonly string[];
}

/** Reads `adminUrl`/debug/clients for `nodeId`: synced when every resource of each type in `types` is ACKED. */
export async function syncState(adminUrl: string, nodeId: string, types: readonly string[]): Promise<SyncState> {
  const res = await fetch(`${adminUrl}/debug/clients`, { signal: AbortSignal.timeout(3000) });
  const body = (await res.json()) as { clients: Obj[] };
  const client = body.clients.find((c) => c['nodeId'] === nodeId);
  if (!client) return { synced: false, nacks: [] };
  const rows = client['types'] as Obj[];
  const nacks = rows
    .filter((t) => t['lastNack'])
    .map((t) => `${String(t['typeUrl'])}: ${JSON.stringify(t['lastNack'])}`);
  const synced = types.every((url) => {
    const row = rows.find((t) => t['typeUrl'] === url);
    const held = (row?.['resources'] as Obj[] | undefined) ?? [];
    return held.length > 0 && held.every((r) => r['state'] === 'ACKED');
  });
  return { synced, nacks };
}

/** Polls until synced; the milliseconds it took, or throws after `ms`. */
export async function untilSynced(
  adminUrl: () => string,
  nodeId: string,
  types: readonly string[],
  ms: number,
): Promise<number> {
  const start = Date.now();
  let last: SyncState | undefined;
  for (;;) {
    try {
      last = await syncState(adminUrl(), nodeId, types);
      if (last.nacks.length > 0) throw new Error(`${nodeId} rejected an update: ${last.nacks.join('; ')}`);
      if (last.synced) return Date.now() - start;
    } catch (err) {
      if ((err as Error).message.includes('rejected')) throw err;
    }
    if (Date.now() - start > ms) throw new Error(`${nodeId} not re-synced within ${ms} ms: ${JSON.stringify(last)}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}
