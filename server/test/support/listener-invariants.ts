/**
 * What Envoy enforces on a set of Listeners at runtime and PGV does not
 * express: unique listener names, unique bound addresses, no two filter
 * chains with the same match (at most one catch-all, counting
 * `default_filter_chain`), a terminal network filter last, and in every
 * HttpConnectionManager the router filter last and only there, with unique
 * filter names.
 */
import type protobuf from 'protobufjs';
import { anyType, envoyType } from './envoy-protos.js';
import type { PgvError } from './pgv.js';

const HCM = 'envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager';
const ROUTER = 'envoy.extensions.filters.http.router.v3.Router';
const TERMINAL_NETWORK = new Set([HCM, 'envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy']);

type Obj = Record<string, unknown>;

/** Decodes Listener bytes into plain objects (enums as strings, defaults filled). */
export function decodeListener(bytes: Uint8Array): Obj {
  const t = envoyType('envoy.config.listener.v3.Listener');
  return t.toObject(t.decode(bytes), { enums: String, longs: Number, defaults: false, arrays: true }) as Obj;
}

export function listenerInvariants(listeners: readonly Obj[]): PgvError[] {
  const errors: PgvError[] = [];
  const names = new Map<string, number>();
  const addresses = new Map<string, string>();
  listeners.forEach((l, i) => {
    const name = String(l['name'] ?? '');
    const at = `listeners[${i}]`;
    if (names.has(name))
      errors.push({
        path: `${at}.name`,
        message: `duplicate listener name "${name}" (also listeners[${names.get(name)}])`,
      });
    names.set(name, i);
    const api = (l['api_listener'] as Obj | undefined)?.['api_listener'] as Obj | undefined;
    if (api) {
      checkHcmAny(api, `${at}.api_listener.api_listener`, errors);
      return;
    }
    const sock = (l['address'] as Obj | undefined)?.['socket_address'] as Obj | undefined;
    if (!sock)
      errors.push({ path: `${at}.address`, message: 'a listener that is not an api_listener needs a socket address' });
    else {
      const key = `${String(sock['address'])}:${String(sock['port_value'] ?? 0)}`;
      const other = addresses.get(key);
      if (other !== undefined)
        errors.push({ path: `${at}.address`, message: `${key} is already bound by listener "${other}"` });
      addresses.set(key, name);
    }
    checkFilterChains(l, at, errors);
  });
  return errors;
}

function checkFilterChains(l: Obj, at: string, errors: PgvError[]): void {
  const chains = (l['filter_chains'] as Obj[] | undefined) ?? [];
  const deflt = l['default_filter_chain'] as Obj | undefined;
  if (chains.length === 0 && !deflt)
    errors.push({ path: `${at}.filter_chains`, message: 'a listener needs a filter chain' });
  const matches = new Map<string, number>();
  chains.forEach((c, j) => {
    const key = JSON.stringify(c['filter_chain_match'] ?? {});
    if (matches.has(key)) {
      errors.push({
        path: `${at}.filter_chains[${j}].filter_chain_match`,
        message: `the same match as filter_chains[${matches.get(key)}] (only one default filter chain)`,
      });
    }
    matches.set(key, j);
  });
  const all: [Obj, string][] = chains.map((c, j) => [c, `${at}.filter_chains[${j}]`]);
  if (deflt) all.push([deflt, `${at}.default_filter_chain`]);
  for (const [c, p] of all) {
    const filters = (c['filters'] as Obj[] | undefined) ?? [];
    filters.forEach((f, k) => {
      const typed = f['typed_config'] as Obj | undefined;
      const type = typed ? typeName(typed) : '';
      const terminal = TERMINAL_NETWORK.has(type);
      const last = k === filters.length - 1;
      if (terminal !== last)
        errors.push({
          path: `${p}.filters[${k}]`,
          message: terminal ? `terminal filter ${type} is not last` : `the last filter (${type}) is not terminal`,
        });
      if (type === HCM && typed) checkHcmAny(typed, `${p}.filters[${k}].typed_config`, errors);
    });
  }
}

function typeName(any: Obj): string {
  const url = String(any['type_url'] ?? '');
  return url.slice(url.lastIndexOf('/') + 1);
}

function unpack(any: Obj): { type: protobuf.Type; value: Obj } | undefined {
  const type = anyType(String(any['type_url'] ?? ''));
  if (!type) return undefined;
  const value = type.toObject(type.decode(any['value'] as Uint8Array), {
    enums: String,
    longs: Number,
    arrays: true,
  }) as Obj;
  return { type, value };
}

function checkHcmAny(any: Obj, at: string, errors: PgvError[]): void {
  if (typeName(any) !== HCM)
    return void errors.push({ path: at, message: `expected an HttpConnectionManager, got ${typeName(any)}` });
  const hcm = unpack(any)?.value ?? {};
  const filters = (hcm['http_filters'] as Obj[] | undefined) ?? [];
  const seen = new Set<string>();
  filters.forEach((f, k) => {
    const p = `${at}.http_filters[${k}]`;
    const name = String(f['name'] ?? '');
    if (seen.has(name)) errors.push({ path: `${p}.name`, message: `duplicate http filter name "${name}"` });
    seen.add(name);
    const typed = f['typed_config'] as Obj | undefined;
    const isRouter = typed !== undefined && typeName(typed) === ROUTER;
    const last = k === filters.length - 1;
    if (isRouter && !last) errors.push({ path: p, message: 'the router filter must be last' });
    if (!isRouter && last) errors.push({ path: p, message: 'the last http filter must be the router' });
  });
  if (filters.length === 0) errors.push({ path: `${at}.http_filters`, message: 'no router filter' });
}
