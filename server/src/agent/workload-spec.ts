/**
 * A workload as text, "CGROUP=k=v,...": its cgroup (relative to the agent's --cgroup, or absolute)
 * and its placement, which inherits what it does not set from the node's. `canopy agent --workload`
 * and the agent's PUT /workloads read the same syntax.
 */
import path from 'node:path';
import type { Placement } from '../domain/locality.js';
import type { Workload } from './datapath.js';

/** A workload or label that does not read; the message names the flag or entry at fault. */
export class WorkloadSpecError extends Error {}

const PLACEMENT_KEYS = new Set(['region', 'zone', 'subzone', 'network', 'node', 'cluster']);

type MutablePlacement = {
  locality: { region: string; zone: string; subzone: string };
  network: string;
  node: string;
  cluster: string;
  labels: Record<string, string>;
};

function setKey(p: MutablePlacement, key: string, value: string): void {
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

/** "k=v" → [k, v]; `flag` names where it came from in the error. */
export function keyValue(text: string, flag: string): [string, string] {
  const i = text.indexOf('=');
  if (i <= 0) throw new WorkloadSpecError(`${flag} "${text}" must be key=value`);
  return [text.slice(0, i), text.slice(i + 1)];
}

export function parseWorkload(text: string, node: Placement, cgroupRoot: string): Workload {
  const eq = text.indexOf('=');
  if (eq <= 0) throw new WorkloadSpecError(`--workload "${text}" must be CGROUP=k=v,...`);
  const dir = text.slice(0, eq);
  const placement: MutablePlacement = { ...node, locality: { ...node.locality }, labels: { ...node.labels } };
  for (const kv of text
    .slice(eq + 1)
    .split(',')
    .filter(Boolean)) {
    const [k, v] = keyValue(kv, `--workload ${dir}:`);
    if (!PLACEMENT_KEYS.has(k) && !/^(label:)?[A-Za-z0-9_./-]+$/.test(k))
      throw new WorkloadSpecError(`--workload ${dir}: key "${k}" is not a scope or label name`);
    setKey(placement, k, v);
  }
  return { cgroup: path.isAbsolute(dir) ? dir : path.join(cgroupRoot, dir), placement };
}
