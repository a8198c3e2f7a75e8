/**
 * `canopy get services|endpoints|clients|clusters|skipped [NAME]` (svc, ep; singular or plural, as kubectl takes them): what
 * a running server holds, from its admin API.
 */
import { Argument, type Command } from 'commander';
import ipaddr from 'ipaddr.js';
import { adminJson } from './admin-client.js';
import { getClusters } from './get-clusters.js';
import { getSkipped } from './get-skipped.js';
import { adminOptions, CliError, EXIT_USAGE, serverError, type AdminTarget } from './common.js';
import { outputOption, printList, type PrintOptions } from './output.js';

interface EndpointJson {
  address: string;
  port: number;
  locality?: { region?: string; zone?: string; subzone?: string };
  health?: string;
  weight?: number;
  network?: string;
  node?: string;
  labels?: Record<string, string>;
}
interface ServiceJson {
  name: string;
  port?: number;
  vip?: string;
  vips?: string[];
  loadBalancing?: { mode?: string };
  endpoints: EndpointJson[];
}
interface ClientJson {
  nodeId: string;
  protocol?: string;
  peer: string;
  connectedAt: string;
  placement: { locality: { region: string; zone: string; subzone: string } };
  types: { typeUrl: string; versionSent: string; versionAcked: string; lastNack?: unknown }[];
}

type Options = AdminTarget & PrintOptions & { service?: string };

/** The kinds `get` lists, with kubectl's habits: singular, plural and a short alias. */
export const KINDS = {
  services: ['services', 'service', 'svc'],
  endpoints: ['endpoints', 'endpoint', 'ep'],
  clients: ['clients', 'client'],
  clusters: ['clusters', 'cluster'],
  skipped: ['skipped'],
} as const;
export type Kind = keyof typeof KINDS;

export function kindOf(word: string): Kind | undefined {
  return (Object.keys(KINDS) as Kind[]).find((k) => (KINDS[k] as readonly string[]).includes(word));
}

export function registerGet(program: Command): void {
  const cmd = program
    .command('get')
    .description(
      'list what a running server holds: services (svc), endpoints (ep), connected clients, Kubernetes clusters, or what it skipped',
    )
    .addArgument(new Argument('<what>', 'what to list').choices(Object.values(KINDS).flat()))
    .addArgument(new Argument('[name]', 'only this one: a service name (for endpoints: their service), a node ID'))
    .addOption(outputOption('list'))
    .option('--no-headers', 'tables without their header line')
    .option('-s, --service <name>', 'endpoints: only this service (the same as the NAME argument)');
  for (const o of adminOptions()) cmd.addOption(o);
  cmd.addHelpText(
    'after',
    "\nExamples:\n  canopy get svc\n  canopy get endpoints web -o wide\n  canopy get services -o jsonpath='{.services[*].name}'",
  );
  cmd.action(async (what: string, name: string | undefined, opts: Options) => {
    const kind = kindOf(what)!;
    if (kind === 'clients') return getClients(opts, name);
    if (kind === 'clusters') return getClusters(opts, name);
    if (kind === 'skipped') return getSkipped(opts);
    const only = name ?? opts.service;
    if (name !== undefined && opts.service !== undefined && name !== opts.service)
      throw new CliError(`get: the NAME "${name}" and --service "${opts.service}" differ; give one`, EXIT_USAGE);
    const all = await fetchServices(opts);
    const services = only !== undefined ? all.filter((s) => s.name === only) : all;
    if (only !== undefined && services.length === 0) throw new CliError(`no service "${only}"`);
    if (kind === 'services') return printServices(opts, services);
    const rows = services.flatMap((s) => s.endpoints.map((e) => ({ service: s.name, ...e })));
    rows.sort((a, b) => a.service.localeCompare(b.service) || compareAddress(a.address, b.address) || a.port - b.port);
    printList(opts, { endpoints: rows }, () => ({
      headers: ['SERVICE', 'ADDRESS', 'PORT', 'LOCALITY', 'HEALTH', 'WEIGHT'],
      rows: rows.map((e) => [
        e.service,
        e.address,
        String(e.port),
        [e.locality?.region, e.locality?.zone, e.locality?.subzone].filter(Boolean).join('/') || '-',
        e.health ?? 'healthy',
        String(e.weight ?? 1),
      ]),
      wideHeaders: ['NETWORK', 'NODE', 'LABELS'],
      wideRows: rows.map((e) => [
        e.network || '-',
        e.node || '-',
        Object.entries(e.labels ?? {})
          .map(([k, v]) => `${k}=${v}`)
          .join(',') || '-',
      ]),
      names: rows.map((e) => `endpoint/${e.service}/${endpointName(e)}`),
    }));
  });
}

const endpointName = (e: { address: string; port: number }) =>
  `${e.address.includes(':') ? `[${e.address}]` : e.address}:${e.port}`;

function printServices(opts: Options, services: readonly ServiceJson[]): void {
  const count = (s: ServiceJson, h: string) => s.endpoints.filter((e) => (e.health ?? 'healthy') === h).length;
  printList(opts, { services }, () => ({
    headers: ['NAME', 'ENDPOINTS', 'HEALTHY', 'MODE', 'PORT', 'VIP'],
    rows: services.map((s) => [
      s.name,
      String(s.endpoints.length),
      String(count(s, 'healthy')),
      s.loadBalancing?.mode ?? 'failover',
      s.port !== undefined ? String(s.port) : '-',
      (s.vips ?? (s.vip !== undefined ? [s.vip] : [])).join(',') || '-',
    ]),
    wideHeaders: ['DRAINING', 'UNHEALTHY', 'LOCALITIES'],
    wideRows: services.map((s) => [
      String(count(s, 'draining')),
      String(count(s, 'unhealthy')),
      String(
        new Set(s.endpoints.map((e) => [e.locality?.region, e.locality?.zone, e.locality?.subzone].join('/'))).size,
      ),
    ]),
    names: services.map((s) => `service/${s.name}`),
  }));
}

async function fetchServices(opts: Options): Promise<ServiceJson[]> {
  const { status, body } = await adminJson<{ services: ServiceJson[] }>(opts, '/api/v1/services');
  if (status !== 200) throw new CliError(`GET /api/v1/services: ${status} ${serverError(body)}`);
  return body.services;
}

async function getClients(opts: Options, node: string | undefined): Promise<void> {
  const { status, body } = await adminJson<{ clients: ClientJson[] }>(opts, '/debug/clients');
  if (status !== 200) throw new CliError(`GET /debug/clients: ${status} ${serverError(body)}`);
  const clients = [...body.clients]
    .filter((c) => node === undefined || c.nodeId === node)
    .sort((a, b) => a.nodeId.localeCompare(b.nodeId));
  if (node !== undefined && clients.length === 0) throw new CliError(`no client with node ID "${node}"`);
  printList(opts, { clients }, () => ({
    headers: ['NODE', 'PROTOCOL', 'LOCALITY', 'PEER', 'TYPES', 'CONNECTED'],
    rows: clients.map((c) => [
      c.nodeId || '-',
      c.protocol ?? 'sotw',
      Object.values(c.placement.locality).filter(Boolean).join('/') || '-',
      c.peer,
      c.types.map((t) => t.typeUrl.slice(t.typeUrl.lastIndexOf('.') + 1)).join(',') || '-',
      c.connectedAt,
    ]),
    wideHeaders: ['SENT', 'ACKED', 'NACKED'],
    wideRows: clients.map((c) => [
      c.types.map((t) => t.versionSent || '-').join(','),
      c.types.map((t) => t.versionAcked || '-').join(','),
      String(c.types.filter((t) => t.lastNack !== undefined && t.lastNack !== null).length),
    ]),
    names: clients.map((c) => `client/${c.nodeId}`),
  }));
}

/** Addresses in numeric order (10.0.0.2 before 10.0.0.10; IPv4 before IPv6), not as text. */
export function compareAddress(a: string, b: string): number {
  const pa = ipaddr.isValid(a) ? ipaddr.parse(a).toByteArray() : [];
  const pb = ipaddr.isValid(b) ? ipaddr.parse(b).toByteArray() : [];
  if (pa.length !== pb.length) return pa.length - pb.length;
  for (let i = 0; i < pa.length; i++) if (pa[i] !== pb[i]) return pa[i]! - pb[i]!;
  return a.localeCompare(b);
}
