/**
 * What `startCanopy` (main.ts) is started with and what it returns: the
 * server's public API, for the CLI, the demo, the tests and embedders.
 */
import type { Logger } from 'pino';
import type { ServerClaCache } from '../resources/endpoint/endpoint.js';
import type { CanopyConfig } from '../domain/spec.js';
import type { ConfigSource } from '../config/config-source.js';
import type { StartApplied, StartConfig } from '../config/config-start.js';
import type { MeshFeed, MeshView } from '../store/mesh-feed.js';
import type { Store } from '../store/store.js';
import type { ServeSecurity } from '../security.js';
import type { XdsObserver } from '../sessions/observer.js';
import type { PushPipeline } from '../sessions/push-pipeline.js';

export interface CanopyOptions {
  readonly config: CanopyConfig;
  /** When set, the file is watched: valid edits apply, invalid ones are logged and ignored. */
  readonly configPath?: string;
  /**
   * The config file as read at start (config/config-start.ts): with it, a
   * file the data directory's store already holds is not parsed or applied
   * again, and each applied file is recorded there. `config.services` is
   * then unused.
   */
  readonly startConfig?: StartConfig;
  /** Both listeners' host, unless xdsHost/adminHost say otherwise. */
  readonly host?: string;
  readonly xdsHost?: string;
  readonly adminHost?: string;
  /**
   * Where services are kept: an open Store, or a directory for the embedded
   * database; neither keeps them in memory only (tests, the demo).
   */
  readonly store?: Store;
  /** `etcd://host:port[,…][/prefix/]`: share services with other replicas through etcd. */
  readonly storeUrl?: string;
  readonly dataDir?: string;
  /** Start on an embedded store that lost acknowledged writes (truncated or damaged log), logging what was lost. */
  readonly acceptStoreLoss?: boolean;
  /** On etcd: apply this replica's config file even though the live replicas apply another (replica-files.ts). */
  readonly takeOver?: boolean;
  /** Tokens, TLS and request limits (docs/security.md, "Access control and TLS"); none by default. */
  readonly security?: Partial<ServeSecurity>;
  readonly xdsPort?: number;
  readonly adminPort?: number;
  readonly debounceMs?: number;
  /** Worker threads that carry the xDS connections (default 1, 0 or 1: the main thread alone; serve/edges.ts). */
  readonly xdsWorkers?: number;
  /** Streams with a push in flight at once (default 256; 0: no limit). */
  readonly pushWindow?: number;
  /** LEDS for Envoy on delta ADS (default: the config's server.leds, else on). */
  readonly leds?: boolean;
  readonly logger?: Logger;
  readonly logLevel?: string;
  /** The heap growth `canopy serve` set (platform/heap-growth.ts): logged at start. */
  readonly heapGrowth?: number;
  /** How long shutdown waits for streams and requests before forcing (default 5 s). */
  readonly shutdownGraceMs?: number;
  /** Also told what the xDS layer does, after the metrics (benchmarks, embedders' tracing). */
  readonly observer?: XdsObserver;
  /** Kubernetes as a source of services (kube/kube-source.ts). */
  readonly kube?: KubeOptions;
}

export interface KubeOptions {
  /** A kubeconfig file; without it, the pod's in-cluster service account. */
  readonly kubeconfig?: string;
  /** Several clusters (kube/kube-clusters.ts), each its name and network; `kubeconfig` is then unused. */
  readonly clusters?: readonly { readonly name: string; readonly network: string; readonly kubeconfig?: string }[];
  /** A clusters file, re-read when it changes (kube/kube-cluster-list.ts); its list replaces `clusters`. */
  readonly clustersFile?: string;
  readonly namespaces?: readonly string[];
  readonly subzoneLabel?: string;
  readonly unreachableMs?: number;
  readonly maxBackoffMs?: number;
  /** Re-checks for Istio's and Kuma's CRDs back off to at most this (default 60 s). */
  readonly crdCheckMs?: number;
}

export interface Canopy {
  readonly xdsAddress: string;
  readonly adminAddress: string;
  /** The web view's URL (a wildcard listen address given as loopback). */
  readonly webView: string;
  readonly store: Store;
  /** The served services, built from the store's watch. */
  readonly mesh: MeshView;
  readonly feed: MeshFeed;
  readonly ads: PushPipeline;
  /** Calls open on each xDS worker thread (empty: the main thread serves them, `xdsWorkers` 0 or 1). */
  xdsThreads(): readonly number[];
  readonly claCache: ServerClaCache;
  /** How the config file met the store at start. */
  readonly started: StartApplied;
  /** The config file's one owner: what the store keeps over it (the note `canopy serve` prints). */
  readonly configSource: Pick<ConfigSource, 'overrides'>;
  /**
   * Resolves once /readyz would answer 200 (with Kubernetes: after its first full sync is written), when
   * "canopy ready" is logged; never while the server is not ready.
   */
  whenReady(): Promise<void>;
  /** Why /readyz answers 503 now, or undefined when it answers 200. */
  notReady(): string | undefined;
  stop(): Promise<void>;
}
