/**
 * Hostname endpoints: an endpoint whose address is a DNS name (Istio's
 * ServiceEntry `resolution: DNS`). Canopy does not resolve names for xDS
 * clients: an Envoy sidecar gets a STRICT_DNS (or LOGICAL_DNS) cluster that
 * resolves them itself, a proxyless gRPC client LOGICAL_DNS clusters (gRFC
 * A37), and the kernel datapath, which connects to addresses only, refuses
 * the service. `dns` says how a sidecar resolves; it is read only when some
 * endpoint is a hostname. Pure.
 */
import { isIp } from './ip.js';
import { describe, join, type Obj, type Reader } from './reader.js';

/** `strict`: Envoy STRICT_DNS (every address of every name); `logical`: LOGICAL_DNS (one name, its first address). */
export type DnsResolution = 'strict' | 'logical';
export const DNS_RESOLUTIONS: readonly DnsResolution[] = ['strict', 'logical'];

/** Envoy's Cluster.DnsLookupFamily values. */
export type DnsLookupFamily = 'V4_PREFERRED' | 'V4_ONLY' | 'V6_ONLY' | 'AUTO' | 'ALL';
export const DNS_LOOKUP_FAMILIES: readonly DnsLookupFamily[] = ['V4_PREFERRED', 'V4_ONLY', 'V6_ONLY', 'AUTO', 'ALL'];

export interface DnsSettings {
  readonly resolution: DnsResolution;
  readonly lookupFamily: DnsLookupFamily;
  /** How often a sidecar re-resolves when the record has no TTL; the TTL is respected when it has one. */
  readonly refreshRateMs: number;
}

/** V4_PREFERRED: an IPv4 address when the name has one, else IPv6 (a dual-stack name works on either host). */
export const DEFAULT_DNS: DnsSettings = { resolution: 'strict', lookupFamily: 'V4_PREFERRED', refreshRateMs: 5_000 };
const DNS_KEYS = ['resolution', 'lookupFamily', 'refreshRateMs'];
const MAX_REFRESH_MS = 86_400_000;

const LABEL = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

/**
 * A DNS hostname (RFC 1123 labels, at most 253 characters, one trailing dot
 * allowed), and not an address literal. A last label of digits only is refused
 * so that a mistyped IPv4 address (`10.0.0.300`) is not read as a name.
 */
export function isHostname(s: string): boolean {
  if (isIp(s)) return false;
  const name = (s.endsWith('.') ? s.slice(0, -1) : s).toLowerCase();
  if (name.length === 0 || name.length > 253) return false;
  const labels = name.split('.');
  if (/^\d+$/.test(labels[labels.length - 1]!)) return false;
  return labels.every((l) => LABEL.test(l));
}

/** The one spelling of a hostname: lower case, no trailing dot. Expects isHostname(s). */
export function canonicalHostname(s: string): string {
  return (s.endsWith('.') ? s.slice(0, -1) : s).toLowerCase();
}

/** Does any of these endpoints name a host rather than an address? */
export function hasHostnames(endpoints: Iterable<{ readonly address: string }>): boolean {
  for (const e of endpoints) if (!isIp(e.address)) return true;
  return false;
}

/** The settings in force for a service with hostname endpoints. */
export function dnsOf(spec: { readonly dns?: DnsSettings }): DnsSettings {
  return spec.dns ?? DEFAULT_DNS;
}

/** An endpoint's address: an IP literal (canonical spelling) or a hostname (lower case). */
export function readEndpointAddress(r: Reader, v: unknown, path: string): string | undefined {
  if (typeof v === 'string' && isHostname(v)) return canonicalHostname(v);
  if (typeof v === 'string' && isIp(v)) return r.ip(v, path);
  return r.fail(path, `must be an IPv4 or IPv6 address literal or a DNS hostname, got ${describe(v)}`);
}

export function readDns(r: Reader, v: unknown, path: string): DnsSettings | undefined {
  const o = r.object(v, path, DNS_KEYS);
  if (!o) return undefined;
  return {
    resolution: r.optional(o, 'resolution', path, (x, p) => r.oneOf(x, p, DNS_RESOLUTIONS)) ?? DEFAULT_DNS.resolution,
    lookupFamily:
      r.optional(o, 'lookupFamily', path, (x, p) => r.oneOf(x, p, DNS_LOOKUP_FAMILIES)) ?? DEFAULT_DNS.lookupFamily,
    refreshRateMs:
      r.optional(o, 'refreshRateMs', path, (x, p) => r.int(x, p, 1, MAX_REFRESH_MS)) ?? DEFAULT_DNS.refreshRateMs,
  };
}

/**
 * What a service with hostname endpoints may not combine: LOGICAL_DNS takes
 * exactly one endpoint (Envoy refuses more; Istio's validation too).
 */
export function checkDns(
  r: Reader,
  dns: DnsSettings | undefined,
  endpoints: readonly { readonly address: string }[],
  path: string,
): void {
  if (dns?.resolution === 'logical' && endpoints.length !== 1)
    r.fail(
      join(path, 'dns.resolution'),
      `logical (LOGICAL_DNS) resolves exactly one endpoint, the service has ${endpoints.length}: use strict`,
    );
}

export function dnsToJson(d: DnsSettings): Obj {
  return { resolution: d.resolution, lookupFamily: d.lookupFamily, refreshRateMs: d.refreshRateMs };
}
