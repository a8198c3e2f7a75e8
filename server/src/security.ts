/**
 * The listeners' access-control, TLS and request-limit settings: read from
 * flags and env by `canopy serve` (cli/serve-security.ts) and applied by
 * startCanopy (main.ts). Kept below both so the composition root does not
 * import the command line.
 */
import type { ReadRules } from './transport/read-access.js';

/** What ADS clients may make the server hold; each unset one defaults from the heap limit (docs/xds.md). */
export interface XdsLimitSettings {
  maxStreamsPerConnection?: number;
  maxNamesPerConnection?: number;
  maxBytesPerConnection?: number;
  subscriptionBudgetBytes?: number;
}

export interface ServeSecurity {
  readonly adminToken?: string;
  /** Where adminToken was read from: the admin API re-reads it when it changes. */
  readonly adminTokenFile?: string;
  readonly adminOpenReads: boolean;
  readonly adminHostnames: readonly string[];
  readonly insecureAdmin: boolean;
  /** PEM cert and key for both listeners; clientCa turns on mTLS for xDS. */
  readonly tls?: { readonly cert: Buffer; readonly key: Buffer; readonly clientCa?: Buffer };
  readonly adminBodyLimit?: number;
  readonly adminWriteLimit?: number;
  readonly xdsLimits?: XdsLimitSettings;
  /** Who may read which services on the xDS port, by SPIFFE ID (docs/security.md); none: everyone reads all. */
  readonly xdsReadRules?: ReadRules;
}
