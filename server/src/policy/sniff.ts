/**
 * A cheap look at config text before any YAML parser is loaded: every Istio,
 * Kuma and Kubernetes document names its apiVersion or kind, and a Canopy
 * config has neither, so text without them needs no importer (nor its
 * parser) at all.
 */
export function mayHoldPolicyDocuments(text: string): boolean {
  return /^\s*(-\s+)?["']?(apiVersion|kind)["']?\s*:/m.test(text);
}
