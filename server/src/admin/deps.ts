/**
 * What the admin API is built from: taken by the app (app.ts) and handed to
 * its route modules (explain.ts), kept below both so a route module does not
 * import the app for it.
 */
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import type { ClaCache } from '../domain/cla-cache.js';
import type { MeshView } from '../store/mesh-feed.js';
import type { InputSkips } from '../store/input-skips.js';
import type { Store } from '../store/store.js';
import type { ClientStatus } from '../sessions/client-status.js';
import type { LoadReport } from '../sessions/load-controller.js';
import type { AccessPolicy } from './access.js';

/**
 * One Kubernetes cluster as `GET /api/v1/clusters` answers it. Declared here, not imported: the Kubernetes
 * source (kube/kube-clusters.ts `ClusterStatus`, one such) sits above admin/, and serve/ hands it over.
 */
export interface ClusterState {
  readonly name: string;
  readonly network: string;
  readonly server: string;
  readonly synced: boolean;
  readonly connected: boolean;
  readonly staleSince?: string;
  readonly staleSeconds: number;
  readonly lastError?: string;
  readonly services: number;
  readonly endpoints: number;
}

export interface AdminDeps {
  /** Where writes go. */
  readonly store: Store;
  /** The served services, built from the store's watch: where reads come from. */
  readonly mesh: MeshView;
  /** Resolves once `mesh` reflects a write's revision, so a write's response implies its effect. */
  readonly caughtUp: (revision: number) => Promise<void>;
  readonly claCache: ClaCache<{ readonly length: number }>;
  /** What the admin API's rules made Canopy leave out of what it serves, and why. */
  readonly skips?: Pick<InputSkips, 'list'>;
  readonly clients: () => readonly ClientStatus[];
  /** Load-aware balancing: the last interval's view of a service (reported load, capacity, weights). */
  readonly load?: (service: string) => LoadReport | undefined;
  readonly registry: Registry;
  readonly logger?: Logger;
  readonly ready: () => boolean;
  /** Why not ready, when a source knows (the Kubernetes source's sync and API server reachability). */
  readonly notReady?: () => string | undefined;
  /** Several Kubernetes clusters: each one's state (GET /api/v1/clusters). */
  readonly clusters?: () => readonly ClusterState[];
  /** Tokens and allowed Host names (access.ts); without it everything is open, as on loopback by default. */
  readonly access?: AccessPolicy;
  /** Largest request body in bytes (default 16 MiB: a 100k-endpoint PUT is about 15 MB). */
  readonly bodyLimit?: number;
  /** Serve HTTPS with this PEM certificate and key. */
  readonly https?: { readonly cert: Buffer; readonly key: Buffer };
  /** Writes per client address per window (default 600 per 10 s). */
  readonly writeRateLimit?: { readonly max: number; readonly windowMs: number };
}
