/**
 * `canopy explain`: why a client gets its CLA. Asks a running server's admin API (`--admin URL`, the
 * default), or explains a config file offline (`--config FILE`). `--policy FILE` adds the CLA under a
 * proposed policy and what would change.
 */
import { InvalidArgumentError, Option, type Command } from 'commander';
import type { ExplainView, SettingChange, explainChange } from '../domain/explain.js';
import type { LoadExplain } from '../domain/load/load-explain.js';
import type { Placement } from '../domain/locality.js';
import { adminJson } from './admin-client.js';
import { adminOptions, CliError, EXIT_USAGE, serverError, type AdminTarget } from './common.js';
import { outputOption, print, type OutputFormat } from './output.js';

const PLACEMENT_FLAGS = ['region', 'zone', 'subzone', 'network', 'node', 'cluster'] as const;

type Options = AdminTarget & {
  config?: string;
  service: string;
  label: string[];
  policy?: string;
  output: OutputFormat;
  json?: boolean;
} & Partial<Record<(typeof PLACEMENT_FLAGS)[number], string>>;

export function registerExplain(program: Command): void {
  const cmd = program
    .command('explain')
    .description('why a client at a placement gets its CLA (from a running server, or a config file offline)')
    .addOption(new Option('--service <name>', 'the service').makeOptionMandatory())
    .addOption(new Option('--config <file>', 'explain this config file offline instead of asking --admin'));
  for (const o of adminOptions()) cmd.addOption(o);
  for (const flag of PLACEMENT_FLAGS)
    cmd.addOption(new Option(`--${flag} <value>`, `the client's ${flag}`).default(''));
  cmd
    .addOption(
      new Option('--label <key=value>', 'a client label (repeatable)').argParser(label).default([] as string[]),
    )
    .addOption(new Option('--policy <file>', 'a proposed policy (YAML): the CLA under it and what changes (--admin)'))
    .addOption(outputOption())
    .addOption(new Option('--json', 'the same as -o json').hideHelp())
    .action(async (opts: Options) => {
      const result = opts.config !== undefined ? await offline(opts) : await online(opts);
      print(opts.json ? 'json' : opts.output, result, () => render(result as ExplainView | Proposal));
    });
}

function label(raw: string, previous: string[]): string[] {
  const eq = raw.indexOf('=');
  if (eq < 1) throw new InvalidArgumentError('must be KEY=VALUE.');
  return [...previous, raw];
}

function placementOf(opts: Options): Placement {
  return {
    locality: { region: opts.region ?? '', zone: opts.zone ?? '', subzone: opts.subzone ?? '' },
    network: opts.network ?? '',
    node: opts.node ?? '',
    cluster: opts.cluster ?? '',
    labels: Object.fromEntries(opts.label.map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)])),
  };
}

async function readPolicy(file: string): Promise<string> {
  const { readFile } = await import('node:fs/promises');
  try {
    return await readFile(file, 'utf8');
  } catch (err) {
    throw new CliError(`cannot read --policy ${file}: ${(err as Error).message}`);
  }
}

/** Asks the server's /debug/explain (POSTing a proposed policy). */
async function online(opts: Options): Promise<unknown> {
  const url = new URL('/debug/explain', opts.admin);
  url.searchParams.set('service', opts.service);
  for (const k of PLACEMENT_FLAGS) if (opts[k]) url.searchParams.set(k, opts[k]);
  for (const l of opts.label) url.searchParams.set(`label.${l.slice(0, l.indexOf('='))}`, l.slice(l.indexOf('=') + 1));
  const policy = opts.policy !== undefined ? await readPolicy(opts.policy) : undefined;
  const { status, body } = await adminJson(
    opts,
    url.pathname + url.search,
    policy !== undefined ? { method: 'POST', body: policy, headers: { 'content-type': 'application/yaml' } } : {},
  );
  if (status !== 200) throw new CliError(`explain: ${serverError(body)}`);
  return body;
}

/** Explains a config file with the server's own code, without a server. */
async function offline(opts: Options): Promise<unknown> {
  if (opts.policy !== undefined)
    throw new CliError('explain: --policy needs --admin (the proposal is checked by the server)', EXIT_USAGE);
  const [{ loadConfigFile }, { Mesh }, { explain }] = await Promise.all([
    import('../config/config-file.js'),
    import('../domain/mesh.js'),
    import('../domain/explain.js'),
  ]);
  const loaded = await loadConfigFile(opts.config!);
  if (!loaded.ok) {
    const lines = loaded.errors.map((e) => `  ${e.path || '(root)'}: ${e.message}`).join('\n');
    throw new CliError(`invalid config ${opts.config}:\n${lines}`);
  }
  const mesh = new Mesh();
  for (const s of loaded.value.services) mesh.put(s);
  const service = mesh.get(opts.service);
  if (!service) throw new CliError(`explain: service "${opts.service}" not found in ${opts.config}`);
  return explain(service, placementOf(opts));
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
    r.envoy
      ? "localities (a proxyless gRPC client's priorities; an Envoy sidecar's in brackets where not the same):"
      : 'localities:',
    ...r.localities.map(
      (l) =>
        `  p${l.priority} ${loc(l.locality)}${envoyPriorityNote(r.envoy, loc(l.locality), l.priority)} weight ${l.weight}, ${l.healthyEndpoints} healthy, share ${pct(l.share)}`,
    ),
    'endpoints:',
    ...r.endpoints.map((e) => `  ${e.address}:${e.port} ${e.priority === null ? '-' : `p${e.priority}`}  ${e.reason}`),
    ...renderEnvoy(r.envoy),
  ];
  return `${out.join('\n')}\n`;
}

const pct = (x: number) => `${(x * 100).toFixed(1)}%`;

/**
 * ` [Envoy p1]` when an Envoy sidecar holds this locality at another priority than the gRPC CLA does (under
 * `unhealthy: count` it keeps a locality of unhealthy endpoints in its priority, where gRPC has none).
 */
function envoyPriorityNote(e: ExplainView['envoy'] | undefined, locality: string, priority: number): string {
  const at = e?.priorities.find((p) => p.localities?.includes(locality))?.priority;
  return at === undefined || at === priority ? '' : ` [Envoy p${at}]`;
}

/** An Envoy sidecar's split (absent from an older server's answer). */
function renderEnvoy(e: ExplainView['envoy'] | undefined): string[] {
  if (!e) return [];
  return [
    "an Envoy sidecar there (unhealthy endpoints as it is sent them; its priorities as Envoy's /clusters numbers them):",
    ...e.priorities.map(
      (p) =>
        `  p${p.priority}${p.localities?.length ? ` ${p.localities.join(', ')}` : ''}: ${p.healthy} of ${p.hosts} healthy, health ${p.health}%, load ${p.load}%${p.panic ? ', in panic (all its hosts, healthy or not)' : ''}`,
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
