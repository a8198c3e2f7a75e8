/**
 * An Istio ServiceEntry → the endpoints of one Canopy service per host.
 *
 * `resolution`: STATIC and NONE take IP endpoints; DNS and DNS_ROUND_ROBIN
 * take hostname (or IP) endpoints, which the clients resolve (Envoy
 * STRICT_DNS and LOGICAL_DNS, as istiod sends them; domain/dns-spec.ts), and
 * without endpoints each host is its own endpoint, as Istio resolves the host
 * itself. Istio's validation is kept: DNS_ROUND_ROBIN takes at most one
 * endpoint, and hosts resolved themselves must be names (no wildcard).
 */
import { canonicalHostname, isHostname } from '../domain/dns-spec.js';
import { isIp } from '../domain/ip.js';
import { parseLocality } from '../domain/locality.js';
import { describe, Findings, isObject, join, labelsOf, list, obj, str, strings, type Obj } from './documents.js';

/** Istio's mesh default `dnsRefreshRate` (60 s), which istiod puts on every DNS cluster. */
const ISTIO_DNS_REFRESH_MS = 60_000;

export interface ServiceEntryEndpoints {
  readonly vip?: string;
  readonly port?: number;
  readonly endpoints: Obj[];
  /** Canopy's `dns` settings, for DNS resolutions. */
  readonly dns?: Obj;
}

export function readServiceEntry(
  f: Findings,
  spec: Obj,
  path: string,
): { hosts: string[]; endpointsOf: (host: string) => ServiceEntryEndpoints } {
  f.keys(spec, path, ['hosts', 'addresses', 'ports', 'endpoints', 'resolution'], {
    location: 'Canopy serves the listed endpoints wherever they are',
    workloadSelector: 'selected workloads are not known to Canopy; list them as endpoints',
    exportTo: 'Canopy has no namespaces',
    subjectAltNames: 'TLS is not part of locality load balancing',
  });
  const hosts = strings(f, spec['hosts'], join(path, 'hosts')) ?? [];
  const resolution = readResolution(f, spec, path);
  const dns = resolution === 'DNS' || resolution === 'DNS_ROUND_ROBIN';
  const addresses =
    spec['addresses'] === undefined ? [] : (strings(f, spec['addresses'], join(path, 'addresses')) ?? []);
  const ports = readPorts(f, spec, path);
  const endpoints = readEndpoints(f, spec, path, resolution, ports);
  const vip = addresses.find((a) => !a.includes('/'));
  const dnsSettings = dns
    ? {
        dns: {
          resolution: resolution === 'DNS_ROUND_ROBIN' ? 'logical' : 'strict',
          refreshRateMs: ISTIO_DNS_REFRESH_MS,
        },
      }
    : {};
  if (dns) noteDns(f, join(path, 'resolution'), resolution);
  const { port, target } = ports;
  const shared: ServiceEntryEndpoints = {
    ...(vip !== undefined ? { vip } : {}),
    ...(port !== undefined ? { port } : {}),
    endpoints,
    ...dnsSettings,
  };
  // DNS without endpoints: Istio resolves each host itself, one service per host.
  const selfResolved = dns && spec['endpoints'] === undefined;
  if (selfResolved) checkSelfResolved(f, hosts, join(path, 'hosts'), target, resolution);
  return {
    hosts,
    endpointsOf: (host) =>
      selfResolved && target !== undefined && isHostname(host)
        ? { ...shared, endpoints: [{ address: canonicalHostname(host), port: target }] }
        : shared,
  };
}

/** `resolution` (NONE when absent), checked; undefined if it is not a string. */
function readResolution(f: Findings, spec: Obj, path: string): string | undefined {
  const resolution = spec['resolution'] === undefined ? 'NONE' : str(f, spec['resolution'], join(path, 'resolution'));
  if (resolution !== undefined && !['NONE', 'STATIC', 'DNS', 'DNS_ROUND_ROBIN'].includes(resolution))
    f.error(join(path, 'resolution'), `must be NONE, STATIC, DNS or DNS_ROUND_ROBIN, got ${describe(resolution)}`);
  else if (resolution === 'NONE' && spec['endpoints'] !== undefined)
    f.note(join(path, 'resolution'), 'NONE (passthrough): Canopy serves the listed endpoints as STATIC');
  return resolution;
}

/** What the first of `ports` says: the service's port, its name, and the port endpoints receive traffic on. */
interface EntryPort {
  readonly port: number | undefined;
  readonly portName: string | undefined;
  readonly target: number | undefined;
}

/** `ports`, each checked; only the first is imported. */
function readPorts(f: Findings, spec: Obj, path: string): EntryPort {
  const ports = spec['ports'] === undefined ? [] : (list(f, spec['ports'], join(path, 'ports')) ?? []);
  const first = ports[0];
  const port = isObject(first) && typeof first['number'] === 'number' ? first['number'] : undefined;
  const portName = isObject(first) && typeof first['name'] === 'string' ? first['name'] : undefined;
  // Istio: endpoints receive traffic on targetPort, which defaults to number.
  const target = isObject(first) && typeof first['targetPort'] === 'number' ? first['targetPort'] : port;
  ports.forEach((x, i) => {
    const pp = join(join(path, 'ports'), i);
    const o = obj(f, x, pp);
    if (!o) return;
    f.keys(o, pp, ['number', 'name', 'targetPort'], {
      protocol: 'the protocol is not part of locality load balancing',
    });
    if (typeof o['number'] !== 'number')
      f.error(join(pp, 'number'), `must be a port number, got ${describe(o['number'])}`);
  });
  if (ports.length > 1) f.note(join(path, 'ports'), `only the first port (${port}) is imported`);
  return { port, portName, target };
}

/** `endpoints` as Canopy endpoints (an IP, or a hostname under a DNS resolution); the bad ones left out. */
function readEndpoints(f: Findings, spec: Obj, path: string, resolution: string | undefined, ports: EntryPort): Obj[] {
  const raw = spec['endpoints'] === undefined ? [] : (list(f, spec['endpoints'], join(path, 'endpoints')) ?? []);
  if (resolution === 'DNS_ROUND_ROBIN' && raw.length > 1)
    f.error(
      join(path, 'endpoints'),
      `there must be at most one endpoint for resolution DNS_ROUND_ROBIN (Istio's validation; Envoy's LOGICAL_DNS takes one), got ${raw.length}`,
    );
  const endpoints: Obj[] = [];
  raw.forEach((e, i) => {
    const endpoint = readEndpoint(f, e, join(join(path, 'endpoints'), i), resolution, ports);
    if (endpoint) endpoints.push(endpoint);
  });
  return endpoints;
}

function readEndpoint(
  f: Findings,
  e: unknown,
  p: string,
  resolution: string | undefined,
  { portName, target }: EntryPort,
): Obj | undefined {
  const dns = resolution === 'DNS' || resolution === 'DNS_ROUND_ROBIN';
  const o = obj(f, e, p);
  if (!o) return undefined;
  f.keys(o, p, ['address', 'ports', 'labels', 'network', 'locality', 'weight'], {
    serviceAccount: 'identity is not part of locality load balancing',
  });
  let address = str(f, o['address'], join(p, 'address'));
  if (address !== undefined && dns && isHostname(address)) address = canonicalHostname(address);
  else if (address !== undefined && !isIp(address)) {
    f.error(
      join(p, 'address'),
      dns
        ? `must be an IP address or a DNS hostname with resolution ${resolution}, got ${describe(address)}`
        : `must be an IPv4 or IPv6 address literal with resolution ${resolution ?? 'STATIC'} (hostnames need resolution DNS), got ${describe(address)}`,
    );
    return undefined;
  }
  const labels = labelsOf(f, o['labels'], join(p, 'labels'));
  const epPorts = o['ports'] === undefined ? {} : (obj(f, o['ports'], join(p, 'ports')) ?? {});
  const epPort = (portName !== undefined ? epPorts[portName] : undefined) ?? target;
  if (typeof epPort !== 'number') {
    f.error(join(p, 'ports'), "no port: give spec.ports[0].number or this endpoint's ports");
    return undefined;
  }
  const locality = o['locality'] === undefined ? undefined : str(f, o['locality'], join(p, 'locality'));
  const network =
    o['network'] === undefined ? labels['topology.istio.io/network'] : str(f, o['network'], join(p, 'network'));
  if (address === undefined) return undefined;
  const l = parseLocality(locality);
  return {
    address,
    port: epPort,
    locality: { region: l.region, zone: l.zone, subzone: l.subzone },
    ...(network ? { network } : {}),
    ...(labels['topology.istio.io/cluster'] ? { cluster: labels['topology.istio.io/cluster'] } : {}),
    ...(labels['kubernetes.io/hostname'] ? { node: labels['kubernetes.io/hostname'] } : {}),
    labels,
    ...(o['weight'] !== undefined ? { weight: o['weight'] } : {}),
  };
}

function checkSelfResolved(
  f: Findings,
  hosts: readonly string[],
  path: string,
  port: unknown,
  resolution: string,
): void {
  if (port === undefined) f.error(join(path.replace(/\.hosts$/, ''), 'ports'), 'needs a port to resolve the hosts on');
  hosts.forEach((h, i) => {
    if (!isHostname(h))
      f.error(
        join(path, i),
        `hosts must be DNS names when resolution ${resolution} has no endpoints (Istio resolves the host itself), got ${describe(h)}`,
      );
  });
}

function noteDns(f: Findings, path: string, resolution: string): void {
  f.note(
    path,
    `${resolution}: Envoy sidecars get a ${resolution === 'DNS' ? 'STRICT_DNS' : 'LOGICAL_DNS'} cluster with each endpoint's ` +
      "priority and locality weight, dns_lookup_family V4_PREFERRED (Istio picks V4_ONLY/V6_ONLY/ALL from the proxy's addresses); " +
      "proxyless gRPC clients get LOGICAL_DNS clusters (gRFC A37): one per endpoint under an aggregate in the client's priority order, " +
      'so locality weights are lost and endpoints of one priority are tried in turn; node agents refuse the service (the kernel resolves no names)',
  );
}
