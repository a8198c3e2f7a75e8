/** `canopy get services|endpoints|clients|skipped`: what a running server holds, from its admin API. */
import { Argument, type Command } from 'commander';
import ipaddr from 'ipaddr.js';
import { adminJson, adminOptions, CliError, serverError, table, type AdminTarget } from './common.js';
import { getSkipped } from './get-skipped.js';
import { outputOption, print, type OutputFormat } from './output.js';

interface EndpointJson {
  address: string;
  port: number;
  locality?: { region?: string; zone?: string; subzone?: string };
  health?: string;
  weight?: number;
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

type Options = AdminTarget & { output: OutputFormat; service?: string };

export function registerGet(program: Command): void {
  const cmd = program
    .command('get')
    .description('list what a running server holds: services, endpoints, connected clients, or what it skipped')
    .addArgument(new Argument('<what>', 'what to list').choices(['services', 'endpoints', 'clients', 'skipped']))
    .addOption(outputOption())
    .option('-s, --service <name>', 'endpoints: only this service (default: every service)');
  for (const o of adminOptions()) cmd.addOption(o);
  cmd.action(async (what: 'services' | 'endpoints' | 'clients' | 'skipped', opts: Options) => {
    if (what === 'clients') return getClients(opts);
    if (what === 'skipped') return getSkipped(opts);
    const services = await fetchServices(opts);
    if (what === 'services') {
      print(opts.output, { services }, () =>
        table(
          ['NAME', 'ENDPOINTS', 'HEALTHY', 'MODE', 'PORT', 'VIP'],
          services.map((s) => [
            s.name,
            String(s.endpoints.length),
            String(s.endpoints.filter((e) => (e.health ?? 'healthy') === 'healthy').length),
            s.loadBalancing?.mode ?? 'failover',
            s.port !== undefined ? String(s.port) : '-',
            (s.vips ?? (s.vip !== undefined ? [s.vip] : [])).join(',') || '-',
          ]),
        ),
      );
      return;
    }
    const chosen = opts.service !== undefined ? services.filter((s) => s.name === opts.service) : services;
    if (opts.service !== undefined && chosen.length === 0) throw new CliError(`no service "${opts.service}"`);
    const rows = chosen.flatMap((s) => s.endpoints.map((e) => ({ service: s.name, ...e })));
    rows.sort((a, b) => a.service.localeCompare(b.service) || compareAddress(a.address, b.address) || a.port - b.port);
    print(opts.output, { endpoints: rows }, () =>
      table(
        ['SERVICE', 'ADDRESS', 'PORT', 'LOCALITY', 'HEALTH', 'WEIGHT'],
        rows.map((e) => [
          e.service,
          e.address,
          String(e.port),
          [e.locality?.region, e.locality?.zone, e.locality?.subzone].filter(Boolean).join('/') || '-',
          e.health ?? 'healthy',
          String(e.weight ?? 1),
        ]),
      ),
    );
  });
}

async function fetchServices(opts: Options): Promise<ServiceJson[]> {
  const { status, body } = await adminJson<{ services: ServiceJson[] }>(opts, '/api/v1/services');
  if (status !== 200) throw new CliError(`GET /api/v1/services: ${status} ${serverError(body)}`);
  return body.services;
}

async function getClients(opts: Options): Promise<void> {
  const { status, body } = await adminJson<{ clients: ClientJson[] }>(opts, '/debug/clients');
  if (status !== 200) throw new CliError(`GET /debug/clients: ${status} ${serverError(body)}`);
  const clients = [...body.clients].sort((a, b) => a.nodeId.localeCompare(b.nodeId));
  print(opts.output, { clients }, () =>
    table(
      ['NODE', 'PROTOCOL', 'LOCALITY', 'PEER', 'TYPES', 'CONNECTED'],
      clients.map((c) => [
        c.nodeId || '-',
        c.protocol ?? 'sotw',
        Object.values(c.placement.locality).filter(Boolean).join('/') || '-',
        c.peer,
        c.types.map((t) => t.typeUrl.slice(t.typeUrl.lastIndexOf('.') + 1)).join(',') || '-',
        c.connectedAt,
      ]),
    ),
  );
}

/** Addresses in numeric order (10.0.0.2 before 10.0.0.10; IPv4 before IPv6), not as text. */
export function compareAddress(a: string, b: string): number {
  const pa = ipaddr.isValid(a) ? ipaddr.parse(a).toByteArray() : [];
  const pb = ipaddr.isValid(b) ? ipaddr.parse(b).toByteArray() : [];
  if (pa.length !== pb.length) return pa.length - pb.length;
  for (let i = 0; i < pa.length; i++) if (pa[i] !== pb[i]) return pa[i]! - pb[i]!;
  return a.localeCompare(b);
}
