/**
 * The policy CRDs the Kubernetes tests install on their API server, each with
 * its spec left open (what Canopy reads is the importers' business, not the
 * schema's), sent as JSON: client-node's typed CRD model would drop
 * x-kubernetes-preserve-unknown-fields, and the API server would then prune
 * every policy's spec.
 */
import type { KubeApiserver } from './kube-apiserver.js';

export interface PolicyCrd {
  readonly group: string;
  readonly version: string;
  readonly kind: string;
  readonly plural: string;
}

export const DESTINATION_RULE: PolicyCrd = {
  group: 'networking.istio.io',
  version: 'v1',
  kind: 'DestinationRule',
  plural: 'destinationrules',
};
export const MESH_LB_STRATEGY: PolicyCrd = {
  group: 'kuma.io',
  version: 'v1alpha1',
  kind: 'MeshLoadBalancingStrategy',
  plural: 'meshloadbalancingstrategies',
};

function definition(c: PolicyCrd): unknown {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${c.plural}.${c.group}` },
    spec: {
      group: c.group,
      names: { kind: c.kind, plural: c.plural, singular: c.kind.toLowerCase(), listKind: `${c.kind}List` },
      scope: 'Namespaced',
      versions: [
        {
          name: c.version,
          served: true,
          storage: true,
          schema: {
            openAPIV3Schema: {
              type: 'object',
              properties: { spec: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } },
            },
          },
        },
      ],
    },
  };
}

/** Installs the CRD and waits until the API server serves its objects. */
export async function installCrd(api: KubeApiserver, c: PolicyCrd): Promise<void> {
  const r = await api.request('POST', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', definition(c));
  if (r.status !== 201) throw new Error(`installing the ${c.kind} CRD: ${r.status} ${JSON.stringify(r.body)}`);
  const deadline = Date.now() + 20_000;
  const served = async () => (await api.request('GET', `/apis/${c.group}/${c.version}/${c.plural}`)).status === 200;
  while (!(await served())) {
    if (Date.now() > deadline) throw new Error(`the ${c.kind} CRD was not served within 20 s`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
