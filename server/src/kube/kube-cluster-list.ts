/**
 * The list of Kubernetes clusters `canopy serve` watches: from repeatable
 * `--kubeconfig NAME=PATH` flags (with `--kube-network NAME=NETWORK`), or a
 * clusters file (`--kube-clusters FILE`, re-read when it changes):
 *
 *   clusters:
 *     - name: east            # the `cluster` scope of its endpoints
 *       network: n1           # the `network` scope (default: none)
 *       kubeconfig: east.yaml # relative to the file; omitted: in-cluster
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { load } from 'js-yaml';
import { CodedError, type FieldError } from '../domain/errors.js';
import type { KubeCluster } from './kube-clusters.js';

/** A DNS-label-like name: it is a scope value, a metric label and a log field. */
const NAME = /^[a-z0-9]([-a-z0-9._]{0,61}[a-z0-9])?$/;

export function clusterNameError(name: string): string | undefined {
  return NAME.test(name) ? undefined : `cluster name "${name}" must be lower-case letters, digits, "-", "." or "_"`;
}

/** The clusters a file's data names, or its errors by field path. */
export function parseClusterList(data: unknown, dir: string): { clusters: KubeCluster[]; errors: FieldError[] } {
  const errors: FieldError[] = [];
  const clusters: KubeCluster[] = [];
  const list = typeof data === 'object' && data !== null ? (data as Record<string, unknown>)['clusters'] : undefined;
  if (!Array.isArray(list)) return { clusters, errors: [{ path: 'clusters', message: 'must be a list' }] };
  const seen = new Set<string>();
  list.forEach((raw: unknown, i) => {
    const at = `clusters[${i}]`;
    if (typeof raw !== 'object' || raw === null) return void errors.push({ path: at, message: 'must be an object' });
    const o = raw as Record<string, unknown>;
    for (const k of Object.keys(o))
      if (!['name', 'network', 'kubeconfig'].includes(k)) errors.push({ path: `${at}.${k}`, message: 'unknown field' });
    const name = o['name'];
    if (typeof name !== 'string') return void errors.push({ path: `${at}.name`, message: 'must be a string' });
    const bad = clusterNameError(name) ?? (seen.has(name) ? `cluster "${name}" is listed twice` : undefined);
    if (bad) return void errors.push({ path: `${at}.name`, message: bad });
    seen.add(name);
    const network = o['network'] ?? '';
    const kubeconfig = o['kubeconfig'];
    if (typeof network !== 'string') return void errors.push({ path: `${at}.network`, message: 'must be a string' });
    if (kubeconfig !== undefined && typeof kubeconfig !== 'string')
      return void errors.push({ path: `${at}.kubeconfig`, message: 'must be a file path' });
    clusters.push({ name, network, ...(kubeconfig ? { kubeconfig: path.resolve(dir, kubeconfig) } : {}) });
  });
  return { clusters, errors };
}

export async function readClusterList(file: string): Promise<KubeCluster[]> {
  let data: unknown;
  try {
    data = load(await readFile(file, 'utf8'));
  } catch (err) {
    throw new CodedError('CANOPY_CONFIG_UNREADABLE', `cannot read ${file}: ${(err as Error).message}`);
  }
  const { clusters, errors } = parseClusterList(data, path.dirname(file));
  if (errors.length > 0)
    throw new CodedError(
      'CANOPY_INVALID_CONFIG',
      `invalid clusters file ${file}: ${errors.map((e) => `${e.path}: ${e.message}`).join('; ')}`,
    );
  return clusters;
}
