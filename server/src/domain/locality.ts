/**
 * Localities, scopes and the attributes that place an endpoint or a client in
 * the locality tree. Pure: no I/O.
 */

export interface Locality {
  readonly region: string;
  readonly zone: string;
  readonly subzone: string;
}

/** What Canopy knows about where a workload (endpoint or client) runs. */
export interface Placement {
  readonly locality: Locality;
  readonly network: string;
  readonly node: string;
  readonly cluster: string;
  readonly labels: Readonly<Record<string, string>>;
}

export const BUILTIN_SCOPES = ['network', 'region', 'zone', 'subzone', 'node', 'cluster'] as const;
export type BuiltinScope = (typeof BUILTIN_SCOPES)[number];
export type LabelScope = `label:${string}`;
export type Scope = BuiltinScope | LabelScope;

export const DEFAULT_SCOPES: readonly Scope[] = ['region', 'zone', 'subzone'];
export const MAX_SCOPES = 8;

export const EMPTY_LOCALITY: Locality = Object.freeze({ region: '', zone: '', subzone: '' });
/** The labels of every endpoint that has none: one shared object, frozen (an endpoint's fields are never written). */
export const NO_LABELS: Readonly<Record<string, string>> = Object.freeze({});

/**
 * One Locality object per distinct locality: a list of 100k endpoints in a
 * thousand localities keeps a thousand objects, not 100k (less to collect, and
 * what is derived from a locality can be kept by object).
 */
export function localityInterner(): (l: {
  readonly region?: string;
  readonly zone?: string;
  readonly subzone?: string;
}) => Locality {
  const held = new Map<string, Map<string, Map<string, Locality>>>();
  return (l) => {
    const region = l.region ?? '';
    const zone = l.zone ?? '';
    const subzone = l.subzone ?? '';
    let zones = held.get(region);
    if (!zones) held.set(region, (zones = new Map()));
    let subzones = zones.get(zone);
    if (!subzones) zones.set(zone, (subzones = new Map()));
    let locality = subzones.get(subzone);
    if (!locality) subzones.set(subzone, (locality = { region, zone, subzone }));
    return locality;
  };
}

export function emptyPlacement(): Placement {
  return { locality: EMPTY_LOCALITY, network: '', node: '', cluster: '', labels: {} };
}

export function isScope(value: unknown): value is Scope {
  if (typeof value !== 'string') return false;
  if ((BUILTIN_SCOPES as readonly string[]).includes(value)) return true;
  return value.startsWith('label:') && value.length > 'label:'.length;
}

/**
 * The value a placement has at one scope; a missing value reads as "". Labels
 * are read as own properties only: `labels.constructor` on a plain object is
 * Object's constructor, which would make a missing `constructor` label differ
 * from an empty one (in the CLA, its cache key and the kernel tree alike).
 */
export function scopeValue(scope: Scope, p: Placement): string {
  switch (scope) {
    case 'network':
      return p.network;
    case 'region':
      return p.locality.region;
    case 'zone':
      return p.locality.zone;
    case 'subzone':
      return p.locality.subzone;
    case 'node':
      return p.node;
    case 'cluster':
      return p.cluster;
    default:
      return labelValue(p.labels, scope.slice('label:'.length));
  }
}

/** A label's value, "" when missing; never an inherited property. */
export function labelValue(labels: Readonly<Record<string, string>>, key: string): string {
  if (!Object.hasOwn(labels, key)) return '';
  const v = labels[key];
  return typeof v === 'string' ? v : '';
}

/** The placement's path down a tree whose levels are `scopes`. */
export function pathOf(scopes: readonly Scope[], p: Placement): string[] {
  return scopes.map((s) => scopeValue(s, p));
}

export function localityKey(l: Locality): string {
  return `${l.region}\u0000${l.zone}\u0000${l.subzone}`;
}

export function formatLocality(l: Locality): string {
  return [l.region, l.zone, l.subzone].join('/');
}

/** Parses "r1/z1/s1" (shorter paths leave lower levels empty). */
export function parseLocality(text: string | null | undefined): Locality {
  if (!text) return EMPTY_LOCALITY;
  const [region = '', zone = '', subzone = ''] = text.split('/');
  return { region, zone, subzone };
}
