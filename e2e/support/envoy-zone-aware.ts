/**
 * Envoy's zone-aware routing inside priority 0, as a test peer computes it
 * (envoyproxy/envoy source/extensions/load_balancing_policies/common/
 * load_balancer_impl.cc: earlyExitNonLocalityRouting,
 * calculateLocalityPercentages, regenerateLocalityRoutingStructures,
 * tryChooseLocalLocalityHosts). Percentages are in 1/10000 as Envoy keeps
 * them. Returns each upstream locality's share of the requests that go to
 * priority 0, or undefined when Envoy does no locality routing (it then
 * spreads over P0's healthy hosts as one set).
 */
export interface LocalityHosts {
  readonly locality: string;
  readonly hosts: number;
}

export function zoneAwareShares(
  upstream: readonly LocalityHosts[],
  local: readonly LocalityHosts[],
  own: string,
  opts: { readonly minClusterSize?: number; readonly routingEnabledPercent?: number } = {},
): Map<string, number> | undefined {
  const up = upstream.filter((l) => l.hosts > 0);
  const totalUp = up.reduce((n, l) => n + l.hosts, 0);
  const totalLocal = local.reduce((n, l) => n + l.hosts, 0);
  // earlyExitNonLocalityRouting, and routing_enabled 0%.
  if (up.length < 2 || local.length < 2) return undefined;
  if (!local.some((l) => l.locality === own && l.hosts > 0)) return undefined;
  if (totalUp < (opts.minClusterSize ?? 6)) return undefined;
  if ((opts.routingEnabledPercent ?? 100) === 0) return undefined;
  const pct = (l: LocalityHosts) => ({
    locality: l.locality,
    upstream: Math.floor((10000 * l.hosts) / totalUp),
    local: Math.floor((10000 * (local.find((x) => x.locality === l.locality)?.hosts ?? 0)) / totalLocal),
  });
  // Envoy keeps its own locality first.
  const ordered = [...up.filter((l) => l.locality === own), ...up.filter((l) => l.locality !== own)].map(pct);
  const hasLocal = ordered[0]?.locality === own;
  const shares = new Map<string, number>(ordered.map((p) => [p.locality, 0]));
  if (hasLocal && ordered[0]!.upstream > 0 && ordered[0]!.upstream >= ordered[0]!.local) {
    shares.set(own, 1);
    return shares;
  }
  const direct = hasLocal && ordered[0]!.local > 0 ? Math.floor((ordered[0]!.upstream * 10000) / ordered[0]!.local) : 0;
  const toLocal = Math.min(1, direct / 10000);
  if (hasLocal) shares.set(own, toLocal);
  const residual = ordered.map((p, i) => (i === 0 && hasLocal ? 0 : Math.max(0, p.upstream - p.local)));
  const total = residual.reduce((n, r) => n + r, 0);
  ordered.forEach((p, i) => {
    const cross = total === 0 ? 1 / ordered.length : residual[i]! / total;
    shares.set(p.locality, (shares.get(p.locality) ?? 0) + (1 - toLocal) * cross);
  });
  return shares;
}
