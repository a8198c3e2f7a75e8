/**
 * A service's VIPs: `vip` (one address) or `vips` (at most one per family,
 * the first the primary). A dual-stack Kubernetes Service has two cluster IPs;
 * the node agent intercepts connects to either, each with its family's backends.
 */
import { describe, join, type Obj, type Reader } from './reader.js';

/** Every VIP of a service, primary first (empty without one). */
export function serviceVips(spec: { readonly vip?: string; readonly vips?: readonly string[] }): readonly string[] {
  return spec.vips ?? (spec.vip !== undefined ? [spec.vip] : []);
}

/** The spec fields for a list of VIPs: `vip` alone for one, `vip` and `vips` for two. */
export function vipFields(vips: readonly string[]): { vip?: string; vips?: readonly string[] } {
  if (vips.length === 0) return {};
  return vips.length === 1 ? { vip: vips[0]! } : { vip: vips[0]!, vips };
}

/** Reads `vip` and `vips` of a service object; undefined when neither is given or either is invalid. */
export function readVips(r: Reader, o: Obj, path: string): readonly string[] | undefined {
  const vip = r.optional(o, 'vip', path, r.ip);
  const vips = r.optional(o, 'vips', path, (x, p) => readVipList(r, x, p));
  if (vips === undefined) return vip !== undefined ? [vip] : undefined;
  if (vip !== undefined && vip !== vips[0]) {
    r.fail(join(path, 'vip'), `must be the first of vips (${vips[0]}) when both are given, got ${describe(vip)}`);
    return undefined;
  }
  return vips;
}

function readVipList(r: Reader, v: unknown, path: string): readonly string[] | undefined {
  if (!Array.isArray(v) || v.length < 1 || v.length > 2)
    return r.fail(path, `must be a list of one or two addresses (one per family), got ${describe(v)}`);
  const before = r.errors.length;
  const ips = v.map((x, i) => r.ip(x, `${path}[${i}]`));
  if (r.errors.length > before) return undefined;
  const list = ips as string[];
  if (list.length === 2 && isV6(list[0]!) === isV6(list[1]!))
    return r.fail(`${path}[1]`, `must be of the other family than ${list[0]} (at most one VIP per family)`);
  return list;
}

/** A canonical address literal is IPv6 when it has a colon. */
function isV6(ip: string): boolean {
  return ip.includes(':');
}
