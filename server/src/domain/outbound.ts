/**
 * Where an Envoy sidecar's outbound traffic for each service lands: which
 * services share one listener and how they are told apart there. Two shapes:
 * - `transparent` (a stock bootstrap, Istio's shape): connections are captured
 *   to one virtual listener with use_original_dst, which hands each to the
 *   listener of its original destination, exact IP:port first, else
 *   0.0.0.0:port (Envoy's ConnectionHandlerImpl::getBalancedHandlerByAddress).
 *   So one listener per service port, bound to nothing: its HTTP/gRPC services
 *   share one RouteConfiguration (a virtual host each, matched by authority),
 *   its TCP services are told apart by destination address (their VIP).
 * - `local` (`canopy.outbound_address`): the sidecar binds a local address at
 *   each service's outboundPort (or port). Services on one local port share
 *   its listener only when all speak HTTP/gRPC (told apart by authority).
 * A listener holding one service is named after it; one holding several is
 * named for its address (`outbound|0.0.0.0:PORT`, `outbound|local:PORT`),
 * a name no service can have. What cannot share is reported by
 * `outboundConflicts` with field paths (config load) and, should it reach the
 * mesh another way, left out of the layout (the first service by name keeps
 * the place). Pure.
 */
import type { FieldError } from './errors.js';
import { isIp } from './ip.js';
import type { ServiceSpec } from './service.js';
import { upstreamOf } from './upstream.js';
import { serviceVips } from './vips.js';

export type OutboundMode = 'transparent' | 'local';

/** Istio's virtual outbound port; a node may name another (`canopy.virtual_outbound_port`). */
export const DEFAULT_VIRTUAL_OUTBOUND_PORT = 15001;
/** The virtual outbound listener's name. */
export const VIRTUAL_OUTBOUND_NAME = 'outbound|virtual';

export interface OutboundGroup {
  /** The Listener's name. */
  readonly name: string;
  readonly mode: OutboundMode;
  /** The port the listener is on (transparent: the services' port; local: their local port). */
  readonly port: number;
  /** HTTP/gRPC services, by name: one virtual host each in one RouteConfiguration. */
  readonly http: readonly ServiceSpec[];
  /** TCP services told apart by their VIP (transparent only). */
  readonly tcpByVip: readonly ServiceSpec[];
  /** A TCP service that takes every other connection on the listener. */
  readonly tcp?: ServiceSpec;
}

export interface OutboundLayout {
  /** Group by listener name. */
  readonly groups: ReadonlyMap<string, OutboundGroup>;
  /** Listener name by service. */
  readonly listenerOf: ReadonlyMap<string, string>;
  /** RouteConfiguration name → the HTTP services in it. */
  readonly routes: ReadonlyMap<string, readonly ServiceSpec[]>;
}

/** Whether a resource name holds several services (never a service's own name). */
export function isSharedName(name: string): boolean {
  return name.includes('|');
}

/** The port a service's listener is on in a mode; undefined when it has none. */
export function outboundPortOf(spec: ServiceSpec, mode: OutboundMode): number | undefined {
  return mode === 'local' ? (spec.outboundPort ?? spec.port) : spec.port;
}

function isTcp(spec: ServiceSpec): boolean {
  return upstreamOf(spec).protocol === 'tcp';
}

/** The name of the RouteConfiguration a group's HTTP services are in. */
export function routeNameOf(group: OutboundGroup): string {
  return group.http.length === 1 ? group.http[0]!.name : group.name;
}

interface Placed {
  readonly group: Omit<OutboundGroup, 'name'>;
  /** Services left out, with why (the service that keeps the place, the field at fault). */
  readonly refused: readonly { spec: ServiceSpec; field: string; message: string }[];
}

/** One port's services (sorted by name) in one mode: who shares, who is refused. */
function place(mode: OutboundMode, port: number, specs: readonly ServiceSpec[]): Placed {
  const refused: { spec: ServiceSpec; field: string; message: string }[] = [];
  const http: ServiceSpec[] = [];
  const tcpByVip: ServiceSpec[] = [];
  let tcp: ServiceSpec | undefined;
  const byVip = new Map<string, ServiceSpec>();
  if (mode === 'local') {
    const anyHttp = specs.some((s) => !isTcp(s));
    for (const s of specs) {
      const first = anyHttp ? specs.find((o) => !isTcp(o))! : specs[0]!;
      if (!isTcp(s)) http.push(s);
      else if (!anyHttp && tcp === undefined) tcp = s;
      else
        refused.push({
          spec: s,
          field: s.outboundPort !== undefined ? 'outboundPort' : 'port',
          message:
            `local outbound port ${port} is also service "${first.name}"'s; a tcp service cannot share one ` +
            `(only HTTP/gRPC services are told apart, by authority): give it its own outboundPort`,
        });
    }
    return { group: { mode, port, http, tcpByVip, ...(tcp ? { tcp } : {}) }, refused };
  }
  for (const s of specs) {
    // Every VIP of a dual-stack service: the node agent keys its maps by each.
    const vips = serviceVips(s);
    const shared = vips.find((v) => byVip.has(v));
    if (shared !== undefined) {
      refused.push({
        spec: s,
        field: s.vips !== undefined ? 'vips' : 'vip',
        message: `${shared}:${port} is also service "${byVip.get(shared)!.name}"'s; a sidecar could not tell them apart`,
      });
      continue;
    }
    for (const v of vips) byVip.set(v, s);
    if (!isTcp(s)) http.push(s);
    else if (s.vip !== undefined) tcpByVip.push(s);
    else if (tcp === undefined) tcp = s;
    else refusedCatchAll(s, tcp);
  }
  // A TCP service without a VIP takes the connections nothing else matches: HTTP services want them too.
  if (tcp && http.length > 0) {
    refusedCatchAll(tcp, http[0]!);
    tcp = undefined;
  }
  return { group: { mode, port, http, tcpByVip, ...(tcp ? { tcp } : {}) }, refused };

  function refusedCatchAll(s: ServiceSpec, other: ServiceSpec): void {
    refused.push({
      spec: s,
      field: 'vip',
      message:
        `port ${port} is also service "${other.name}"'s; a tcp service on a shared port needs a vip ` +
        `(a sidecar tells tcp services on one port apart by destination address)`,
    });
  }
}

function byPort(specs: readonly ServiceSpec[], mode: OutboundMode): Map<number, ServiceSpec[]> {
  const out = new Map<number, ServiceSpec[]>();
  const sorted = [...specs].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  for (const s of sorted) {
    const port = outboundPortOf(s, mode);
    if (port === undefined) continue;
    let list = out.get(port);
    if (!list) out.set(port, (list = []));
    list.push(s);
  }
  return out;
}

export function outboundLayout(specs: readonly ServiceSpec[], mode: OutboundMode): OutboundLayout {
  const groups = new Map<string, OutboundGroup>();
  const listenerOf = new Map<string, string>();
  const routes = new Map<string, readonly ServiceSpec[]>();
  for (const [port, list] of byPort(specs, mode)) {
    const { group } = place(mode, port, list);
    const members = [...group.http, ...group.tcpByVip, ...(group.tcp ? [group.tcp] : [])];
    if (members.length === 0) continue;
    const name = members.length === 1 ? members[0]!.name : `outbound|${mode === 'local' ? 'local' : '0.0.0.0'}:${port}`;
    const g: OutboundGroup = { name, ...group };
    groups.set(name, g);
    for (const m of members) listenerOf.set(m.name, name);
    if (g.http.length > 0) routes.set(routeNameOf(g), g.http);
  }
  return { groups, listenerOf, routes };
}

export interface OutboundConflict {
  /** Index of the refused service in the input. */
  readonly index: number;
  readonly field: string;
  readonly message: string;
}

/** Services that cannot have a listener beside the others, in either mode, with the field at fault. */
export function outboundConflicts(specs: readonly ServiceSpec[]): OutboundConflict[] {
  const index = new Map(specs.map((s, i) => [s.name, i]));
  const out: OutboundConflict[] = [];
  const seen = new Set<string>();
  for (const mode of ['transparent', 'local'] as const) {
    for (const [port, list] of byPort(specs, mode)) {
      for (const r of place(mode, port, list).refused) {
        const key = `${r.spec.name}|${r.field}`;
        if (seen.has(key)) continue;
        seen.add(key);
        out.push({ index: index.get(r.spec.name) ?? -1, field: r.field, message: r.message });
      }
    }
  }
  return out.sort((a, b) => a.index - b.index);
}

/** The domains a service's virtual host matches, as istiod emits them: name, name:port, VIP, VIP:port. */
export function authoritiesOf(spec: ServiceSpec, localPort?: number): string[] {
  const out = [spec.name];
  const ports = [spec.port, localPort].filter((p, i, a): p is number => p !== undefined && a.indexOf(p) === i);
  for (const p of ports) out.push(`${spec.name}:${p}`);
  if (spec.vip !== undefined && isIp(spec.vip)) {
    out.push(spec.vip);
    const host = spec.vip.includes(':') ? `[${spec.vip}]` : spec.vip;
    for (const p of ports) out.push(`${host}:${p}`);
  }
  return out;
}

/**
 * What adding or replacing `spec` among `others` (the mesh's other services)
 * would make a sidecar unable to tell apart, as errors on `spec`'s fields
 * (an admin PUT): conflicts that were not there without it.
 */
export function conflictsWith(others: readonly ServiceSpec[], spec: ServiceSpec): FieldError[] {
  const key = (c: OutboundConflict, specs: readonly ServiceSpec[]) => `${specs[c.index]?.name}|${c.field}|${c.message}`;
  const before = new Set(outboundConflicts(others).map((c) => key(c, others)));
  const all = [...others, spec];
  const out: FieldError[] = [];
  for (const c of outboundConflicts(all)) {
    if (before.has(key(c, all))) continue;
    const refused = all[c.index];
    out.push(
      refused?.name === spec.name
        ? { path: c.field, message: c.message }
        : { path: c.field, message: `service "${refused?.name}" would lose its listener: ${c.message}` },
    );
  }
  return out;
}
