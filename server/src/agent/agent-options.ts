/**
 * What the node agent is started with: shared by the agent (agent.ts) and its
 * flag parser (cli/agent.ts), kept below both so neither imports the other
 * for it.
 */
import type { Placement } from '../domain/locality.js';
import type { ClientTlsMaterial } from '../transport/client-credentials.js';
import type { Workload } from './datapath.js';

export const DEFAULT_PIN_DIR = '/sys/fs/bpf/canopy';

export interface AgentOptions {
  /** host:port of Canopy's ADS server */
  readonly server: string;
  /** TLS to it (--ca-file, --cert-file, --key-file); absent: plaintext. */
  readonly tls?: ClientTlsMaterial;
  readonly nodeId: string;
  readonly placement: Placement;
  readonly cgroup: string;
  readonly workloads?: readonly Workload[];
  readonly pinDir?: string;
  readonly graceMs?: number;
  /** HTTP port for /metrics (0: any free port; default 19100) */
  readonly metricsPort?: number;
  readonly metricsHost?: string;
  readonly logLevel?: string;
  readonly maxEndpoints?: number;
  readonly maxNodes?: number;
  readonly maxServices?: number;
  /** How often the agent checks that its datapath is still installed (default 1000 ms). */
  readonly watchMs?: number;
  /**
   * Called when the datapath was uninstalled under the running agent (after
   * the agent has stopped). Default: the process exits with status 1.
   */
  readonly onUninstalled?: (reason: string) => void;
}
