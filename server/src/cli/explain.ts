/**
 * `canopy explain`: why a client gets its CLA. Asks a running server's admin
 * API (`--admin URL`), or explains a config file offline (`--config FILE`).
 * `--policy FILE` adds the CLA under a proposed policy and what would change.
 */
import { readFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { explain, explainChange, type ExplainView, type SettingChange } from '../domain/explain.js';
import type { LoadExplain } from '../domain/load/load-explain.js';
import type { Placement } from '../domain/locality.js';
import { Mesh } from '../domain/mesh.js';
import { loadConfigFile } from '../config/config-file.js';
import { adminFetch } from './common.js';

export const EXPLAIN_USAGE = `  canopy explain (--admin URL | --config FILE) --service S [--region R] [--zone Z] [--subzone SZ]
                 [--network N] [--node N] [--cluster C] [--label K=V]… [--policy FILE] [--json]`;

export async function runExplain(
  args: string[],
  out: NodeJS.WritableStream,
  err: NodeJS.WritableStream,
): Promise<number> {
  let values;
  try {
    ({ values } = parseArgs({
      args,
      options: {
        admin: { type: 'string' },
        config: { type: 'string' },
        service: { type: 'string' },
        region: { type: 'string' },
        zone: { type: 'string' },
        subzone: { type: 'string' },
        network: { type: 'string' },
        node: { type: 'string' },
        cluster: { type: 'string' },
        label: { type: 'string', multiple: true },
        policy: { type: 'string' },
        json: { type: 'boolean' },
      },
      strict: true,
    }));
  } catch (e) {
    err.write(`canopy explain: ${(e as Error).message}\nusage:\n${EXPLAIN_USAGE}\n`);
    return 2;
  }
  if (!values.service || (values.admin === undefined) === (values.config === undefined)) {
    err.write(`canopy explain: give --service and one of --admin or --config\nusage:\n${EXPLAIN_USAGE}\n`);
    return 2;
  }
  const labels: [string, string][] = [];
  for (const l of values.label ?? []) {
    const eq = l.indexOf('=');
    if (eq < 1) {
      err.write(`canopy explain: --label must be KEY=VALUE, got "${l}"\n`);
      return 2;
    }
    labels.push([l.slice(0, eq), l.slice(eq + 1)]);
  }
  const placement: Placement = {
    locality: { region: values.region ?? '', zone: values.zone ?? '', subzone: values.subzone ?? '' },
    network: values.network ?? '',
    node: values.node ?? '',
    cluster: values.cluster ?? '',
    labels: Object.fromEntries(labels),
  };
  const policy = values.policy !== undefined ? await readFile(values.policy, 'utf8') : undefined;
  let result: unknown;
  if (values.admin !== undefined) {
    const url = new URL('/debug/explain', values.admin);
    url.searchParams.set('service', values.service);
    for (const k of ['region', 'zone', 'subzone', 'network', 'node', 'cluster'] as const)
      if (values[k] !== undefined) url.searchParams.set(k, values[k]);
    for (const [k, v] of labels) url.searchParams.set(`label.${k}`, v);
    const res = await adminFetch(
      url,
      policy !== undefined ? { method: 'POST', body: policy, headers: { 'content-type': 'application/yaml' } } : {},
    );
    result = await res.json();
    if (!res.ok) {
      const e = (result as { error: { message: string; fields?: { path: string; message: string }[] } }).error;
      err.write(`canopy explain: ${e.message}\n`);
      for (const f of e.fields ?? []) err.write(`  ${f.path}: ${f.message}\n`);
      return 1;
    }
  } else {
    const loaded = await loadConfigFile(values.config!);
    if (!loaded.ok) {
      for (const e of loaded.errors) err.write(`canopy explain: ${e.path || '(root)'}: ${e.message}\n`);
      return 1;
    }
    const mesh = new Mesh();
    for (const s of loaded.value.services) mesh.put(s);
    const service = mesh.get(values.service);
    if (!service) {
      err.write(`canopy explain: service "${values.service}" not found\n`);
      return 1;
    }
    if (policy !== undefined) {
      err.write('canopy explain: --policy needs --admin (the proposal is checked by the server)\n');
      return 2;
    }
    result = explain(service, placement);
  }
  if (values.json) out.write(`${JSON.stringify(result, null, 2)}\n`);
  else out.write(render(result as ExplainView | Proposal));
  return 0;
}

interface Proposal {
  current: ExplainView;
  proposed: ExplainView;
  diff: ReturnType<typeof explainChange>['diff'];
  /** Absent from an older server's answer. */
  settings?: SettingChange[];
  warnings?: string[];
}

function render(r: ExplainView | Proposal): string {
  if ('current' in r) {
    const lines = r.diff.map(
      (d) =>
        `  ${d.endpoint}: priority ${d.current.priority ?? '-'} → ${d.proposed.priority ?? '-'}, locality weight ${d.current.localityWeight} → ${d.proposed.localityWeight}, share ${pct(d.current.localityShare)} → ${pct(d.proposed.localityShare)}`,
    );
    const settings = (r.settings ?? []).map(
      (c) => `  ${c.field}: ${String(c.current ?? '-')} → ${String(c.proposed ?? '-')}`,
    );
    const warnings = (r.warnings ?? []).map((w) => `warning: ${w}\n`).join('');
    return `${warnings}current:\n${render(r.current)}\nproposed:\n${render(r.proposed)}\nchanges:\n${[...settings, ...lines].join('\n') || '  none'}\n`;
  }
  const loc = (l: { region: string; zone: string; subzone: string }) => `${l.region}/${l.zone}/${l.subzone}`;
  const out = [
    `service ${r.service}, client at ${loc(r.client.locality)}; cache key ${r.cacheKey}; tree node [${r.treeNode.join(', ')}]; overprovisioning ${r.overprovisioningFactor}${r.reach ? `; reach ${r.reach.minEndpoints} endpoints` : ''}`,
    ...renderLoad(r.load),
    'localities:',
    ...r.localities.map(
      (l) =>
        `  p${l.priority} ${loc(l.locality)} weight ${l.weight}, ${l.healthyEndpoints} healthy, share ${pct(l.share)}`,
    ),
    'endpoints:',
    ...r.endpoints.map((e) => `  ${e.address}:${e.port} ${e.priority === null ? '-' : `p${e.priority}`}  ${e.reason}`),
    ...renderEnvoy(r.envoy),
  ];
  return `${out.join('\n')}\n`;
}

const pct = (x: number) => `${(x * 100).toFixed(1)}%`;

/** An Envoy sidecar's split (absent from an older server's answer). */
function renderEnvoy(e: ExplainView['envoy'] | undefined): string[] {
  if (!e) return [];
  return [
    'an Envoy sidecar there (unhealthy endpoints as it is sent them):',
    ...e.priorities.map(
      (p) =>
        `  p${p.priority}: ${p.healthy} of ${p.hosts} healthy, health ${p.health}%, load ${p.load}%${p.panic ? ', in panic (all its hosts, healthy or not)' : ''}`,
    ),
    ...Object.entries(e.shares).map(([k, x]) => `  ${k} ${pct(x)}`),
  ];
}

/** A load-aware service: why this client node's load goes where it goes. */
function renderLoad(l: LoadExplain | undefined): string[] {
  if (!l) return [];
  const rps = (x: number) => (x >= 10 || x === 0 ? String(Math.round(x)) : x.toFixed(1));
  return [
    `load (${l.balancing}, ${l.capacityRpsPerEndpoint} rps an endpoint${l.utilizationTarget < 1 ? ` to ${pct(l.utilizationTarget)}` : ''}): client node ${l.clientNode || '(root)'} offers ${rps(l.offeredRps)} rps, spill ${pct(l.spill)}`,
    ...l.summary.map((s) => `  ${s}`),
    ...l.localities.map(
      (x) =>
        `  tier ${x.tier} ${x.locality}: reported ${rps(x.reportedRps)} rps, assigned ${rps(x.assignedRps)} of ${rps(x.capacityRps)}, weight ${x.weight} (${pct(x.share)})${x.drained ? ', drained' : ''}`,
    ),
    ...(l.replicas ?? []).map((x) => `  replica ${x.replica}: its clients offer ${rps(x.offeredRps)} rps`),
  ];
}
