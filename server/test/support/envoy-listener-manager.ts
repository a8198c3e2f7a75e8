/**
 * A test peer: what a stock Envoy's listener manager does with one LDS update
 * and where it sends a captured connection, from Envoy's source (no Envoy
 * binary runs here). Works on decoded Listeners and RouteConfigurations.
 * - Binding: a listener is bound when it is added unless `bind_to_port` is
 *   false (ListenerImpl; source/common/listener_manager/listener_impl.cc). A
 *   bind to an address the host does not have fails ("cannot bind ... Cannot
 *   assign requested address", envoy#17237) and LdsApiImpl::onConfigUpdate
 *   NACKs the update (lds_api.cc).
 * - Addresses: a listener whose address another listener already has is
 *   refused ("error adding listener: '...' has duplicate address '...' as
 *   existing listener", ListenerManagerImpl::addOrUpdateListenerInternal,
 *   listener_manager_impl.cc), and the update is NACKed.
 * - A NACKed update is not dropped whole: LdsApiImpl adds each listener on
 *   its own and keeps the ones it could add (`applied`); a real Envoy 1.40
 *   showed it (e2e/envoy-rules.test.ts: a new listener in the same update as
 *   a duplicate address went active).
 * - Hand-off: a connection accepted by a listener with use_original_dst goes
 *   to the listener whose address is its original destination, else to
 *   0.0.0.0:port, else stays (ConnectionHandlerImpl::getBalancedHandlerByAddress,
 *   connection_handler_impl.cc; ActiveTcpSocket::newConnection).
 * - Filter chains: the most specific destination prefix_ranges match wins, a
 *   chain without prefix_ranges matches any destination, default_filter_chain
 *   last (FilterChainManagerImpl::findFilterChain, filter_chain_manager_impl.cc).
 * - Virtual hosts: exact domain, then `*.suffix` (longest first), then
 *   `prefix*`, then `*` (RouteMatcher::findVirtualHost, source/common/router/config_impl.cc);
 *   the host is compared with its port (ignore_port_in_host_matching is off).
 */
import ipaddr from 'ipaddr.js';

type Obj = Record<string, unknown>;

export interface LdsVerdict {
  /** False: Envoy NACKs the update. */
  readonly accepted: boolean;
  readonly errors: readonly string[];
  /** The listeners Envoy adds from the update all the same (every one it did not refuse). */
  readonly applied: readonly string[];
}

function socket(l: Obj): { address: string; port: number } | undefined {
  const s = (l['address'] as Obj | undefined)?.['socket_address'] as Obj | undefined;
  return s ? { address: String(s['address']), port: Number(s['port_value'] ?? 0) } : undefined;
}

function bindsToPort(l: Obj): boolean {
  const b = l['bind_to_port'] as Obj | undefined;
  return b === undefined || b['value'] !== false;
}

/** Whether a host can bind this address: any-address, loopback, or one of `local`. */
function bindable(address: string, local: readonly string[]): boolean {
  if (local.includes(address)) return true;
  if (!ipaddr.isValid(address)) return false;
  const range = ipaddr.parse(address).range();
  return range === 'unspecified' || range === 'loopback';
}

/** The verdict a stock Envoy gives one LDS update (state of the world). */
export function applyLds(listeners: readonly Obj[], local: readonly string[] = []): LdsVerdict {
  const errors: string[] = [];
  const applied: string[] = [];
  const byAddress = new Map<string, string>();
  for (const l of listeners) {
    const name = String(l['name']);
    const at = socket(l);
    if (!at) continue;
    const key = `${at.address}:${at.port}`;
    const other = byAddress.get(key);
    if (other !== undefined) {
      errors.push(`'${name}' has duplicate address '${key}' as existing listener '${other}'`);
      continue;
    }
    if (bindsToPort(l) && !bindable(at.address, local)) {
      errors.push(`cannot bind '${key}' for listener '${name}': Cannot assign requested address`);
      continue;
    }
    byAddress.set(key, name);
    applied.push(name);
  }
  return { accepted: errors.length === 0, errors, applied };
}

/** The listener a connection captured to the virtual listener ends on, by its original destination. */
export function handOff(listeners: readonly Obj[], dst: { address: string; port: number }): Obj | undefined {
  const virtual = listeners.find((l) => (l['use_original_dst'] as Obj | undefined)?.['value'] === true);
  if (!virtual) return undefined;
  const at = (address: string) =>
    listeners.find((l) => {
      const s = socket(l);
      return s?.address === address && s.port === dst.port;
    });
  return at(dst.address) ?? at(dst.address.includes(':') ? '::' : '0.0.0.0') ?? virtual;
}

function prefixMatch(range: Obj, address: string): number | undefined {
  const prefix = String(range['address_prefix']);
  const len = Number((range['prefix_len'] as Obj | undefined)?.['value'] ?? 0);
  const a = ipaddr.parse(address);
  const p = ipaddr.parse(prefix);
  if (a.kind() !== p.kind()) return undefined;
  return a.match(p, len) ? len : undefined;
}

/** The filter chain a connection to `dst` is given on this listener. */
export function filterChainFor(listener: Obj, dst: string): Obj | undefined {
  let best: { chain: Obj; len: number } | undefined;
  for (const chain of (listener['filter_chains'] as Obj[] | undefined) ?? []) {
    const ranges = ((chain['filter_chain_match'] as Obj | undefined)?.['prefix_ranges'] as Obj[] | undefined) ?? [];
    if (ranges.length === 0) {
      if (!best || best.len < 0) best = { chain, len: -1 };
      continue;
    }
    for (const r of ranges) {
      const len = prefixMatch(r, dst);
      if (len !== undefined && (!best || len > best.len)) best = { chain, len };
    }
  }
  return best?.chain ?? (listener['default_filter_chain'] as Obj | undefined);
}

/** The virtual host a request with this authority is routed by. */
export function virtualHostFor(route: Obj, authority: string): Obj | undefined {
  const host = authority.toLowerCase();
  const vhosts = (route['virtual_hosts'] as Obj[] | undefined) ?? [];
  const domains = (v: Obj) => ((v['domains'] as string[] | undefined) ?? []).map((d) => d.toLowerCase());
  const exact = vhosts.find((v) => domains(v).includes(host));
  if (exact) return exact;
  let best: { v: Obj; len: number } | undefined;
  for (const v of vhosts)
    for (const d of domains(v))
      if (d.length > 1 && d.startsWith('*') && host.endsWith(d.slice(1)) && (!best || d.length > best.len))
        best = { v, len: d.length };
  if (best) return best.v;
  for (const v of vhosts)
    for (const d of domains(v)) if (d.length > 1 && d.endsWith('*') && host.startsWith(d.slice(0, -1))) return v;
  return vhosts.find((v) => domains(v).includes('*'));
}
