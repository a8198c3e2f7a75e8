/**
 * `canopy agent ...`: flag parsing for the node agent, with errors that name
 * the flag at fault.
 */
import path from 'node:path';
import { parseArgs } from 'node:util';
import type { Placement } from '../domain/locality.js';
import { DEFAULT_PIN_DIR, type AgentOptions } from './agent-options.js';
import type { Workload } from './datapath.js';

export const AGENT_USAGE = `  canopy agent --server HOST:PORT --node-id ID --cgroup DIR [--region R] [--zone Z] [--subzone S]
               [--network N] [--cluster C] [--label k=v ...] [--workload CGROUP=k=v,... ...]
               [--pin-dir DIR] [--grace-ms N] [--metrics-host H] [--metrics-port N] [--log-level L]
               [--max-services N] [--max-nodes N] [--max-endpoints N]
  canopy agent uninstall --cgroup DIR [--pin-dir DIR]`;

/** \`canopy agent --help\`: what each flag means. */
export const AGENT_HELP = `canopy agent: loads Canopy's locality trees into the kernel (cgroup/connect4 and connect6) on this node.

usage:
${AGENT_USAGE}

  --server HOST:PORT     Canopy's ADS (xDS) address
  --node-id ID           this node's id (also its \`node\` scope value)
  --cgroup DIR           cgroup v2 directory the program is attached to (its workloads' connects are steered)
  --region/--zone/--subzone/--network/--cluster/--label k=v
                         this node's placement: the locality of connects from cgroups without a --workload entry
  --workload CGROUP=k=v,...
                         a workload cgroup (relative to --cgroup, or absolute) with its own placement, which its
                         descendant cgroups share; a missing cgroup is skipped with a logged reason. The set can be
                         replaced while the agent runs: PUT /workloads {"workloads": ["CGROUP=k=v,...", ...]}
  --pin-dir DIR          bpffs directory for the pinned program and maps (default /sys/fs/bpf/canopy)
  --grace-ms N           how long a replaced tree stays readable (default 200)
  --max-services N       service map size (default 4096), --max-nodes N (default 262144),
  --max-endpoints N      endpoint slots (default 1048576); used when the maps are created, kept on restart
  --metrics-host H, --metrics-port N   /metrics, /healthz, /debug/state (default 127.0.0.1:19100)
  --log-level L          pino level (default info)

  uninstall              detach the program from --cgroup and remove the pins (and so the maps)

Requires Linux 5.14 or newer, root (or CAP_BPF + CAP_NET_ADMIN), cgroup v2 and bpffs.`;

const PLACEMENT_KEYS = new Set(['region', 'zone', 'subzone', 'network', 'node', 'cluster']);

export class AgentFlagError extends Error {}


function setKey(p: { locality: { region: string; zone: string; subzone: string }; network: string; node: string; cluster: string; labels: Record<string, string> }, key: string, value: string): void {
  switch (key) {
    case 'region':
    case 'zone':
    case 'subzone':
      p.locality[key] = value;
      return;
    case 'network':
    case 'node':
    case 'cluster':
      p[key] = value;
      return;
    default:
      p.labels[key.startsWith('label:') ? key.slice('label:'.length) : key] = value;
  }
}

function pair(text: string, flag: string): [string, string] {
  const i = text.indexOf('=');
  if (i <= 0) throw new AgentFlagError(`${flag} "${text}" must be key=value`);
  return [text.slice(0, i), text.slice(i + 1)];
}

/**
 * One workload, "CGROUP=k=v,...": its cgroup (relative to `cgroupRoot`, or
 * absolute) and its placement, which inherits what it does not set from the
 * node's. Used by --workload and by the agent's PUT /workloads.
 */
export function parseWorkload(text: string, node: Placement, cgroupRoot: string): Workload {
  const eq = text.indexOf('=');
  if (eq <= 0) throw new AgentFlagError(`--workload "${text}" must be CGROUP=k=v,...`);
  const dir = text.slice(0, eq);
  const placement = { ...node, locality: { ...node.locality }, labels: { ...node.labels } };
  for (const kv of text.slice(eq + 1).split(',').filter(Boolean)) {
    const [k, v] = pair(kv, `--workload ${dir}:`);
    if (!PLACEMENT_KEYS.has(k) && !/^(label:)?[A-Za-z0-9_./-]+$/.test(k)) throw new AgentFlagError(`--workload ${dir}: key "${k}" is not a scope or label name`);
    setKey(placement, k, v);
  }
  return { cgroup: path.isAbsolute(dir) ? dir : path.join(cgroupRoot, dir), placement };
}

export function parseAgentArgs(args: string[]): AgentOptions {
  const { values } = parseArgs({
    args,
    options: {
      server: { type: 'string' },
      'node-id': { type: 'string' },
      region: { type: 'string' },
      zone: { type: 'string' },
      subzone: { type: 'string' },
      network: { type: 'string' },
      cluster: { type: 'string' },
      label: { type: 'string', multiple: true },
      cgroup: { type: 'string' },
      workload: { type: 'string', multiple: true },
      'pin-dir': { type: 'string' },
      'grace-ms': { type: 'string' },
      'metrics-host': { type: 'string' },
      'metrics-port': { type: 'string' },
      'log-level': { type: 'string' },
      'max-services': { type: 'string' },
      'max-nodes': { type: 'string' },
      'max-endpoints': { type: 'string' },
    },
    strict: true,
  });
  const required = (flag: 'server' | 'node-id' | 'cgroup'): string => {
    const v = values[flag];
    if (!v) throw new AgentFlagError(`--${flag} is required`);
    return v;
  };
  const server = required('server');
  if (!/^[^:]+:\d+$/.test(server) && !/^\[[^\]]+\]:\d+$/.test(server)) throw new AgentFlagError(`--server "${server}" must be HOST:PORT`);
  const nodeId = required('node-id');
  const cgroup = path.resolve(required('cgroup'));
  const node = {
    locality: { region: values.region ?? '', zone: values.zone ?? '', subzone: values.subzone ?? '' },
    network: values.network ?? '',
    node: nodeId,
    cluster: values.cluster ?? '',
    labels: {} as Record<string, string>,
  };
  for (const l of values.label ?? []) {
    const [k, v] = pair(l, '--label');
    node.labels[k] = v;
  }
  const workloads: Workload[] = (values.workload ?? []).map((w) => parseWorkload(w, node as Placement, cgroup));
  const int = (flag: 'grace-ms' | 'metrics-port' | 'max-services' | 'max-nodes' | 'max-endpoints', max: number, min = 0): number | undefined => {
    const raw = values[flag];
    if (raw === undefined) return undefined;
    const n = Number(raw);
    if (!Number.isInteger(n) || n < min || n > max) throw new AgentFlagError(`--${flag} must be an integer in ${min}..${max}, got "${raw}"`);
    return n;
  };
  const graceMs = int('grace-ms', 600_000);
  const metricsPort = int('metrics-port', 65535);
  const maxServices = int('max-services', 1 << 24, 1);
  const maxNodes = int('max-nodes', 1 << 26, 1);
  const maxEndpoints = int('max-endpoints', 1 << 26, 1);
  return {
    server,
    nodeId,
    placement: node as Placement,
    cgroup,
    workloads,
    ...(values['pin-dir'] !== undefined ? { pinDir: values['pin-dir'] } : {}),
    ...(graceMs !== undefined ? { graceMs } : {}),
    ...(maxServices !== undefined ? { maxServices } : {}),
    ...(maxNodes !== undefined ? { maxNodes } : {}),
    ...(maxEndpoints !== undefined ? { maxEndpoints } : {}),
    ...(metricsPort !== undefined ? { metricsPort } : {}),
    ...(values['metrics-host'] !== undefined ? { metricsHost: values['metrics-host'] } : {}),
    ...(values['log-level'] !== undefined ? { logLevel: values['log-level'] } : {}),
  };
}

/** \`canopy agent uninstall --cgroup DIR [--pin-dir DIR]\` */
export function parseUninstallArgs(args: string[]): { cgroup: string; pinDir: string } {
  const { values } = parseArgs({ args, options: { cgroup: { type: 'string' }, 'pin-dir': { type: 'string' } }, strict: true });
  if (!values.cgroup) throw new AgentFlagError('--cgroup is required');
  return { cgroup: path.resolve(values.cgroup), pinDir: values['pin-dir'] ?? DEFAULT_PIN_DIR };
}
