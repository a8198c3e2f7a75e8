/**
 * Where a client is, from its xDS node: the locality from node.locality, the
 * other scopes and labels from node.metadata. Canopy's own keys come first;
 * Istio's spellings are read too, so existing sidecar bootstraps work as-is.
 */
import type { Placement } from '../domain/locality.js';
import type { NodeInfo } from '../wire/request.js';

export function placementOf(node: NodeInfo | undefined): Placement {
  const md = node?.metadata ?? {};
  return {
    locality: {
      region: node?.locality.region ?? '',
      zone: node?.locality.zone ?? '',
      subzone: node?.locality.subzone ?? '',
    },
    network: str(md['network']) ?? str(md['NETWORK']) ?? '',
    node: str(md['node']) ?? str(md['NODE_NAME']) ?? '',
    cluster: str(md['cluster']) ?? str(md['CLUSTER_ID']) ?? '',
    labels: labels(md['labels']) ?? labels(md['LABELS']) ?? {},
  };
}

function str(v: unknown): string | undefined {
  return typeof v === 'string' ? v : undefined;
}

function labels(v: unknown): Record<string, string> | undefined {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return undefined;
  const out: Record<string, string> = {};
  for (const [k, val] of Object.entries(v)) if (typeof val === 'string') out[k] = val;
  return out;
}
