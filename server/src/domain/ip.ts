/**
 * IP address literals: which strings are addresses, and their one spelling.
 * Syntax only, via ipaddr.js; what an endpoint may be is decided by the readers.
 */
import ipaddr from 'ipaddr.js';

/** An IPv4 dotted quad or an IPv6 literal (no zone id). Syntax only: see canonicalIp for what an endpoint may be. */
export function isIp(s: string): boolean {
  // Only the four-part decimal form: ipaddr.js's IPv4.isValid also takes "1", "0x7f.1" and octal.
  if (ipaddr.IPv4.isValidFourPartDecimal(s)) return true;
  return s.includes(':') && !s.includes('%') && ipaddr.IPv6.isValid(s);
}

/**
 * The one spelling of an address, so `FD00::1`, `fd00:0::1` and `fd00::1` are
 * one endpoint: IPv6 per RFC 5952 (lower case, longest zero run compressed),
 * IPv4-mapped as `::ffff:a.b.c.d`. Expects isIp(s).
 */
export function canonicalIp(s: string): string {
  const addr = ipaddr.parse(s);
  if (addr.kind() === 'ipv4') return addr.toString();
  const v6 = addr as ipaddr.IPv6;
  return v6.isIPv4MappedAddress() ? `::ffff:${v6.toIPv4Address().toString()}` : v6.toRFC5952String();
}

/** 0.0.0.0 and :: mean "any address" to a listener and nothing to a client. */
export function isUnspecified(s: string): boolean {
  return ipaddr.parse(s).range() === 'unspecified';
}

/**
 * Why an address literal cannot be a destination (an endpoint's or a VIP's
 * address), or undefined if it can: the unspecified address in any spelling
 * (0.0.0.0/8, ::, ::ffff:0.0.0.0), IPv4 written as IPv6 (::ffff:a.b.c.d and
 * the translated and compatible forms: give the IPv4 address itself, so one
 * backend has one key), multicast and broadcast. Expects isIp(s).
 */
export function unusableAddress(s: string): string | undefined {
  const addr = ipaddr.parse(s);
  if (addr.kind() === 'ipv6') {
    const v6 = addr as ipaddr.IPv6;
    if (v6.parts.every((p) => p === 0)) return 'the unspecified address (it means "any address" to a listener)';
    const range = v6.range();
    if (range === 'ipv4Mapped' || range === 'rfc6145') {
      const v4 = new ipaddr.IPv4(v6.toByteArray().slice(12));
      return v4.range() === 'unspecified'
        ? `an IPv4-mapped form of the unspecified address ${v4.toString()}`
        : `an IPv4 address written as IPv6; give ${v4.toString()} itself`;
    }
    if (range === 'multicast') return 'a multicast address';
    return undefined;
  }
  const range = addr.range();
  if (range === 'unspecified') return 'the unspecified address (0.0.0.0/8 means "this network", not a host)';
  if (range === 'broadcast') return 'the broadcast address';
  if (range === 'multicast') return 'a multicast address';
  return undefined;
}
