/**
 * `GET /api/v1/clusters`: each Kubernetes cluster Canopy watches (several
 * clusters, kube/kube-clusters.ts): whether its first list is written, whether
 * its API server answers, and while it does not, since when (its endpoints are
 * its last state). Empty when Canopy watches one cluster or none.
 */
import type { FastifyInstance } from 'fastify';
import type { AdminDeps } from './deps.js';

export function clusterRoutes(app: FastifyInstance, deps: AdminDeps): void {
  app.get('/api/v1/clusters', async () => ({ clusters: deps.clusters?.() ?? [] }));
}
