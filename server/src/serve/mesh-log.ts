/**
 * What the log says of each change of the served mesh: the service and its
 * endpoint count, and, once per change of the list, the policy features node
 * agents cannot apply (also in the tree's unsupported_policy).
 */
import type { Logger } from 'pino';
import { KERNEL_HOSTNAMES, kernelUnsupported } from '../domain/policy.js';
import { kernelServable } from '../resources/tree-codec.js';
import type { MeshFeed } from '../store/mesh-feed.js';

/** Logs each change `feed` reports; returns a function that stops. */
export function logMeshChanges(feed: MeshFeed, logger: Logger): () => void {
  const kernelGaps = new Map<string, string>();
  const warnKernelGaps = (name: string): void => {
    const spec = feed.mesh.get(name)?.spec;
    const gaps =
      spec && kernelServable(spec)
        ? kernelUnsupported(spec.loadBalancing.policy, { nodes: [], endpoints: spec.endpoints }).join(', ')
        : '';
    if (gaps === (kernelGaps.get(name) ?? '')) return;
    kernelGaps.set(name, gaps);
    if (gaps)
      logger.warn(
        { service: name, unsupportedPolicy: gaps },
        gaps.includes(KERNEL_HOSTNAMES)
          ? 'the kernel tree cannot carry hostname endpoints: node agents refuse the service (NACK naming it)'
          : 'the kernel tree cannot express these policy features: node agents serve the plain tree',
      );
  };
  return feed.subscribe((changes) => {
    for (const c of changes) {
      logger.info({ service: c.service, kind: c.kind, endpoints: c.endpoints.length }, 'service changed');
      warnKernelGaps(c.service);
    }
  });
}
