/**
 * `canopy serve`'s Kubernetes flags (docs/kubernetes.md): where the API server
 * is, which namespaces, the subzone label and the readiness threshold.
 */
import { Option, type Command } from 'commander';
import type { KubeOptions } from '../main.js';
import { clusterNameError } from '../kube/kube-cluster-list.js';
import type { KubeCluster } from '../kube/kube-clusters.js';
import { CliError, EXIT_USAGE, intIn } from './common.js';

export interface KubeValues {
  /** `PATH`, or `NAME=PATH` per cluster (repeatable). */
  kubeconfig?: string[];
  kubeNetwork?: string[];
  kubeClusters?: string;
  kubeClusterName?: string;
  kubeInCluster?: boolean;
  kubeNamespace?: string[];
  kubeSubzoneLabel: string;
  kubeUnreachableMs: number;
  kubeCrdCheckMs: number;
}

export function addKubeOptions(serve: Command): void {
  serve
    .addOption(
      new Option(
        '--kubeconfig <[name=]file>',
        "watch Services, EndpointSlices and Nodes of this kubeconfig's cluster (repeatable as NAME=FILE: several clusters, one mesh)",
      )
        .env('CANOPY_KUBECONFIG')
        .argParser(repeat),
    )
    .addOption(
      new Option('--kube-network <name=network>', "the network of cluster NAME's endpoints (repeatable)").argParser(
        repeat,
      ),
    )
    .addOption(
      new Option('--kube-clusters <file>', 'watch the clusters this file lists (re-read when it changes)').env(
        'CANOPY_KUBE_CLUSTERS',
      ),
    )
    .addOption(
      new Option(
        '--kube-cluster-name <name>',
        "with several clusters: the name of --kube-in-cluster's cluster",
      ).default('local'),
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

const repeat = (v: string, prev: string[] | undefined) => [...(prev ?? []), v];

export function kubeOptions(values: KubeValues): KubeOptions | undefined {
  const configs = values.kubeconfig ?? [];
  if (configs.length === 0 && !values.kubeInCluster && values.kubeClusters === undefined) return undefined;
  const common = {
    ...(values.kubeNamespace?.length ? { namespaces: values.kubeNamespace } : {}),
    subzoneLabel: values.kubeSubzoneLabel,
    unreachableMs: values.kubeUnreachableMs,
    crdCheckMs: values.kubeCrdCheckMs,
  };
  if (values.kubeClusters !== undefined) {
    if (configs.length > 0 || values.kubeInCluster)
      throw new CliError(
        'serve: --kube-clusters FILE lists every cluster: drop --kubeconfig and --kube-in-cluster',
        EXIT_USAGE,
      );
    return { clustersFile: values.kubeClusters, ...common };
  }
  const named = configs.map(namedConfig);
  if (
    named.length + (values.kubeInCluster ? 1 : 0) === 1 &&
    named[0]?.name === undefined &&
    !values.kubeNetwork?.length
  )
    return { ...(named[0] ? { kubeconfig: named[0].file } : {}), ...common };
  return { clusters: clusterList(named, values), ...common };
}

function namedConfig(v: string): { name?: string; file: string } {
  const eq = v.indexOf('=');
  const name = eq > 0 ? v.slice(0, eq) : '';
  // A name has no slash; `a=b/c.yaml` is cluster a, `./x=y.yaml` a file.
  return eq > 0 && !name.includes('/') ? { name, file: v.slice(eq + 1) } : { file: v };
}

function clusterList(named: { name?: string; file: string }[], values: KubeValues) {
  const networks = new Map<string, string>();
  for (const n of values.kubeNetwork ?? []) {
    const eq = n.indexOf('=');
    if (eq <= 0) throw new CliError(`serve: --kube-network takes NAME=NETWORK, got "${n}"`, EXIT_USAGE);
    networks.set(n.slice(0, eq), n.slice(eq + 1));
  }
  const clusters: KubeCluster[] = named.map((n) => {
    if (n.name === undefined)
      throw new CliError(
        `serve: with several clusters each --kubeconfig names its cluster: NAME=${n.file}`,
        EXIT_USAGE,
      );
    return { name: n.name, network: networks.get(n.name) ?? '', kubeconfig: n.file };
  });
  if (values.kubeInCluster) {
    const name = values.kubeClusterName ?? 'local';
    clusters.unshift({ name, network: networks.get(name) ?? '' });
  }
  const seen = new Set<string>();
  for (const c of clusters) {
    const bad = clusterNameError(c.name) ?? (seen.has(c.name) ? `cluster "${c.name}" is given twice` : undefined);
    if (bad) throw new CliError(`serve: ${bad}`, EXIT_USAGE);
    seen.add(c.name);
  }
  for (const name of networks.keys())
    if (!seen.has(name)) throw new CliError(`serve: --kube-network names no cluster: "${name}"`, EXIT_USAGE);
  return clusters;
}
