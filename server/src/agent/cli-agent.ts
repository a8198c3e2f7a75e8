/**
 * `canopy agent ...`: flag parsing for the node agent, with errors that name
 * the flag at fault.
 */
import path from 'node:path';
import { parseArgs } from 'node:util';
import type { Placement } from '../domain/locality.js';
import type { AgentOptions } from './agent.js';
import type { Workload } from './datapath.js';

export const AGENT_USAGE = `  canopy agent --server HOST:PORT --node-id ID --cgroup DIR [--region R] [--zone Z] [--subzone S]
               [--network N] [--cluster C] [--label k=v ...] [--workload CGROUP=k=v,... ...]
               [--pin-dir DIR] [--grace-ms N] [--metrics-host H] [--metrics-port N] [--log-level L]`;

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
  const workloads: Workload[] = (values.workload ?? []).map((w) => {
    const eq = w.indexOf('=');
    if (eq <= 0) throw new AgentFlagError(`--workload "${w}" must be CGROUP=k=v,...`);
    const dir = w.slice(0, eq);
    const placement = { ...node, locality: { ...node.locality }, labels: { ...node.labels } };
    for (const kv of w.slice(eq + 1).split(',').filter(Boolean)) {
      const [k, v] = pair(kv, `--workload ${dir}:`);
      if (!PLACEMENT_KEYS.has(k) && !/^(label:)?[A-Za-z0-9_./-]+$/.test(k)) throw new AgentFlagError(`--workload ${dir}: key "${k}" is not a scope or label name`);
      setKey(placement, k, v);
    }
    return { cgroup: path.isAbsolute(dir) ? dir : path.join(cgroup, dir), placement: placement as Placement };
  });
  const int = (flag: 'grace-ms' | 'metrics-port', max: number): number | undefined => {
    const raw = values[flag];
    if (raw === undefined) return undefined;
    const n = Number(raw);
    if (!Number.isInteger(n) || n < 0 || n > max) throw new AgentFlagError(`--${flag} must be an integer in 0..${max}, got "${raw}"`);
    return n;
  };
  const graceMs = int('grace-ms', 600_000);
  const metricsPort = int('metrics-port', 65535);
  return {
    server,
    nodeId,
    placement: node as Placement,
    cgroup,
    workloads,
    ...(values['pin-dir'] !== undefined ? { pinDir: values['pin-dir'] } : {}),
    ...(graceMs !== undefined ? { graceMs } : {}),
    ...(metricsPort !== undefined ? { metricsPort } : {}),
    ...(values['metrics-host'] !== undefined ? { metricsHost: values['metrics-host'] } : {}),
    ...(values['log-level'] !== undefined ? { logLevel: values['log-level'] } : {}),
  };
}
