/**
 * What a NACK refused, for the log, the metric and `canopy proxy-status`:
 * the services the NACKed response's resources belong to, read from their
 * names (a cluster's incarnation or DNS child, a LEDS collection or member
 * named `xdstp://canopy/…LbEndpoint/<service>/…`). Pure.
 */
import { parseDnsChildName } from '../resources/dns-cluster.js';
import { LEDS_PREFIX, unescapeSegment } from '../resources/endpoint/leds-names.js';
import { parseIncarnatedName } from '../resources/incarnations.js';

/** The metric label of a NACK whose response carried several services' resources (sent again apart). */
export const SEVERAL_SERVICES = '(several)';

/** The service a resource name stands for (the name itself for one that names none, e.g. a shared listener). */
export function serviceOfName(name: string): string {
  if (name.startsWith(LEDS_PREFIX)) {
    const rest = name.slice(LEDS_PREFIX.length);
    const segment = rest.slice(0, rest.indexOf('/') < 0 ? rest.length : rest.indexOf('/'));
    return unescapeSegment(segment) ?? segment;
  }
  return parseDnsChildName(name)?.service ?? parseIncarnatedName(name).service;
}

/**
 * A client's error_detail on one line, at most `max` characters: its start and its end, since Envoy
 * writes the refused resource first and why last (`… : Proto constraint validation failed (…)`).
 */
export function shortDetail(detail: string, max = 200): string {
  const one = detail.replace(/\s+/g, ' ').trim();
  if (one.length <= max) return one;
  const head = Math.floor(max / 4);
  return `${one.slice(0, head)} … ${one.slice(one.length - (max - head - 3))}`;
}

/** The services of these names, in order of first appearance, each once. */
export function servicesOf(names: readonly string[]): string[] {
  return [...new Set(names.map(serviceOfName))];
}

/** The NACK's service label: the one service its response carried, or SEVERAL_SERVICES. */
export function nackServiceLabel(names: readonly string[]): string {
  const services = servicesOf(names);
  return services.length === 1 ? services[0]! : SEVERAL_SERVICES;
}
