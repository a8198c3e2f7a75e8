/**
 * A cheap look at config text before any YAML parser is loaded: every Istio
 * and Kubernetes document names its apiVersion or kind, Kuma's universal form
 * its `type` (Dataplane, MeshLoadBalancingStrategy), and a Canopy config has
 * none of them at the top of a document, so text without them needs no
 * importer (nor its parser) at all.
 */
const POLICY_MARKERS = [
  /^\s*(-\s+)?["']?(apiVersion|kind)["']?\s*:/m,
  // Kuma universal form; a Canopy config's `type:` (failover targets) never names these.
  /["']?type["']?\s*:\s*["']?(Dataplane|MeshLoadBalancingStrategy)\b/,
];

export function mayHoldPolicyDocuments(text: string): boolean {
  return POLICY_MARKERS.some((re) => re.test(text));
}
