/**
 * `canopy serve`'s Kubernetes flags (docs/kubernetes.md): where the API server
 * is, which namespaces, the subzone label and the readiness threshold.
 */
import { Option, type Command } from 'commander';
import type { KubeOptions } from '../main.js';
import { intIn } from './common.js';

export interface KubeValues {
  kubeconfig?: string;
  kubeInCluster?: boolean;
  kubeNamespace?: string[];
  kubeSubzoneLabel: string;
  kubeUnreachableMs: number;
  kubeCrdCheckMs: number;
}

export function addKubeOptions(serve: Command): void {
  serve
    .addOption(
      new Option('--kubeconfig <file>', "watch Services, EndpointSlices and Nodes of this kubeconfig's cluster").env(
        'CANOPY_KUBECONFIG',
      ),
    )
    .addOption(
      new Option('--kube-in-cluster', "watch the cluster Canopy runs in, as its pod's service account").env(
        'CANOPY_KUBE_IN_CLUSTER',
      ),
    )
    .addOption(
      new Option('--kube-namespace <ns>', 'watch only this namespace (repeatable; default: all)')
        .env('CANOPY_KUBE_NAMESPACES')
        .argParser((v: string, prev: string[] | undefined) => [...(prev ?? []), ...v.split(',').filter(Boolean)]),
    )
    .addOption(
      new Option('--kube-subzone-label <label>', 'the Node label read as the subzone')
        .env('CANOPY_KUBE_SUBZONE_LABEL')
        .default('topology.istio.io/subzone'),
    )
    .addOption(
      new Option('--kube-unreachable-ms <n>', '/readyz fails once the API server has not answered for this long')
        .env('CANOPY_KUBE_UNREACHABLE_MS')
        .argParser(intIn(0, 3_600_000))
        .default(10_000),
    )
    .addOption(
      new Option('--kube-crd-check-ms <n>', "re-check for Istio's and Kuma's CRDs at most this far apart")
        .env('CANOPY_KUBE_CRD_CHECK_MS')
        .argParser(intIn(100, 3_600_000))
        .default(60_000),
    );
}

export function kubeOptions(values: KubeValues): KubeOptions | undefined {
  if (values.kubeconfig === undefined && !values.kubeInCluster) return undefined;
  return {
    ...(values.kubeconfig !== undefined ? { kubeconfig: values.kubeconfig } : {}),
    ...(values.kubeNamespace?.length ? { namespaces: values.kubeNamespace } : {}),
    subzoneLabel: values.kubeSubzoneLabel,
    unreachableMs: values.kubeUnreachableMs,
    crdCheckMs: values.kubeCrdCheckMs,
  };
}
