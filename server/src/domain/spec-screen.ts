/**
 * A service as some source wrote it (a Kubernetes mapping, a store row an
 * older version or another replica wrote) → what of it may be served, by the
 * admin API's own rules (parseServiceSpec): nothing here adds or drops a rule.
 * An endpoint those rules refuse is left out and the rest of the service
 * kept; a service refused as a whole (its name, its policy, …) is left out.
 * Each left-out part is reported with its field path, its value and why.
 */
import type { FieldError } from './errors.js';
import type { Obj } from './reader.js';
import { endpointKey, sameEndpoint, type Endpoint, type ServiceSpec } from './service.js';
import { serviceSpecToJson } from './spec-json.js';
import { parseServiceSpec } from './spec.js';

export interface SkippedPart {
  /** The field at fault, as the admin API names it (`endpoints[3].port`; '' for the whole service). */
  readonly path: string;
  readonly message: string;
  /** The value at `path`, as JSON text (absent when there is none to show). */
  readonly value?: string;
  /** The endpoint left out (its address:port as written); absent when the whole service is. */
  readonly endpoint?: string;
  /** The endpoint's index in the list screened. */
  readonly index?: number;
}

export interface Screened {
  /** What may be served; undefined when the service is refused as a whole. */
  readonly spec?: ServiceSpec;
  readonly skipped: readonly SkippedPart[];
}

const ENDPOINT_PATH = /^endpoints\[(\d+)\]/;
const ENDPOINT_FIELDS = ['address', 'port', 'locality', 'network', 'node', 'cluster', 'labels', 'health', 'weight'];

/** Screens a whole service (a store's put, a Kubernetes mapping). */
export function screenService(spec: ServiceSpec): Screened {
  let input: Obj;
  let raw: unknown;
  try {
    raw = (spec as { endpoints?: unknown }).endpoints;
    input = { ...serviceSpecToJson({ ...headOf(spec), endpoints: [] }), endpoints: raw as never };
  } catch (err) {
    return { skipped: [{ path: '', message: `cannot be read: ${(err as Error).message}` }] };
  }
  const list = Array.isArray(raw) ? (raw as unknown[]) : [];
  const first = parseServiceSpec(input);
  if (first.ok) return { spec: keepObjects(first.value, list), skipped: [] };
  const { bad, whole } = split(first.errors);
  const parts = [...bad].map(([i, errors]) => endpointPart(input, list[i], i, errors));
  if (whole.length > 0 || !Array.isArray(raw)) return { skipped: [...whole.map((e) => part(input, e)), ...parts] };
  const second = parseServiceSpec({ ...input, endpoints: list.filter((_, i) => !bad.has(i)) as never });
  if (!second.ok) return { skipped: [...second.errors.map((e) => part(input, e)), ...parts] };
  return { spec: second.value, skipped: parts };
}

/**
 * Screens endpoints written into a served service (a store's patch), under
 * that service's settings: the upserts that may be served, and the rest.
 */
export function screenUpserts(
  served: ServiceSpec,
  upserts: readonly Endpoint[],
): { upserts: Endpoint[]; skipped: SkippedPart[] } {
  if (upserts.length === 0) return { upserts: [], skipped: [] }; // a removal only: nothing to screen
  const screened = screenService({ ...headOf(served), endpoints: upserts } as ServiceSpec);
  if (screened.spec) return { upserts: screened.spec.endpoints as Endpoint[], skipped: [...screened.skipped] };
  // Refused together (their weights' sum): each is left out, with the reason.
  const why = screened.skipped.map((s) => `${s.path}: ${s.message}`).join('; ');
  return {
    upserts: [],
    skipped: upserts.map((e, i) => ({ path: `endpoints[${i}]`, message: why, endpoint: endpointKey(e), index: i })),
  };
}

/**
 * A bounded name for why something was left out, for a metric label:
 * `endpoint.port`, `endpoint.address`, `service.name`, `service.loadBalancing`, `service.unreadable`.
 */
export function skipReason(path: string): string {
  const m = ENDPOINT_PATH.exec(path);
  if (m) {
    const field = path.slice(m[0].length).replace(/^\./, '').split(/[.[]/)[0] ?? '';
    return `endpoint.${ENDPOINT_FIELDS.includes(field) ? field : 'entry'}`;
  }
  if (path === '') return 'service.unreadable';
  const field = path.split(/[.[]/)[0] ?? '';
  return `service.${/^[A-Za-z]{1,40}$/.test(field) ? field : 'other'}`;
}

function split(errors: readonly FieldError[]): { bad: Map<number, FieldError[]>; whole: FieldError[] } {
  const bad = new Map<number, FieldError[]>();
  const whole: FieldError[] = [];
  for (const e of errors) {
    const m = ENDPOINT_PATH.exec(e.path);
    if (!m) {
      whole.push(e);
      continue;
    }
    const i = Number(m[1]);
    const list = bad.get(i);
    if (list) list.push(e);
    else bad.set(i, [e]);
  }
  return { bad, whole };
}

function endpointPart(input: Obj, raw: unknown, index: number, errors: readonly FieldError[]): SkippedPart {
  const first = errors[0]!;
  const key = keyOf(raw);
  return {
    ...part(input, first),
    message: errors.map((e) => (e === first ? e.message : `${e.path}: ${e.message}`)).join('; '),
    ...(key !== undefined ? { endpoint: key } : {}),
    index,
  };
}

function part(input: Obj, e: FieldError): SkippedPart {
  const value = valueText(valueAt(input, e.path));
  return { path: e.path, message: e.message, ...(value !== undefined ? { value } : {}) };
}

/** The endpoint's key as a store keyed it, whatever its fields hold. */
function keyOf(raw: unknown): string | undefined {
  if (typeof raw !== 'object' || raw === null) return undefined;
  const { address, port } = raw as { address?: unknown; port?: unknown };
  return endpointKey({ address: String(address), port: port as number });
}

/** The value a field path (`endpoints[2].locality.zone`) names in `input`. */
export function valueAt(input: unknown, path: string): unknown {
  let at: unknown = input;
  for (const step of path.match(/[^.[\]]+/g) ?? []) {
    if (typeof at !== 'object' || at === null) return undefined;
    at = (at as Record<string, unknown>)[step];
  }
  return at;
}

function valueText(v: unknown): string | undefined {
  if (v === undefined) return undefined;
  try {
    const text = JSON.stringify(v);
    return text.length > 200 ? `${text.slice(0, 200)}…` : text;
  } catch {
    return String(v);
  }
}

/** The written endpoint objects where they are what the parse built: memory stays shared with the store. */
function keepObjects(spec: ServiceSpec, raw: readonly unknown[]): ServiceSpec {
  const parsed = spec.endpoints;
  if (parsed.length !== raw.length) return spec;
  const out = new Array<Endpoint>(parsed.length);
  for (let i = 0; i < parsed.length; i++) {
    const r = raw[i] as Endpoint;
    const p = parsed[i]!;
    out[i] = complete(r) && sameEndpoint(r, p) ? r : p;
  }
  return { ...spec, endpoints: out };
}

function complete(r: unknown): boolean {
  if (typeof r !== 'object' || r === null) return false;
  for (const k of ENDPOINT_FIELDS) if (!(k in r)) return false;
  return true;
}

/** A spec without its endpoints; after a patch `endpoints` is a getter that would build the whole list. */
function headOf(spec: ServiceSpec): Omit<ServiceSpec, 'endpoints'> {
  const out: Record<string, unknown> = {};
  for (const k of Object.keys(spec)) if (k !== 'endpoints') out[k] = (spec as unknown as Record<string, unknown>)[k];
  return out as unknown as Omit<ServiceSpec, 'endpoints'>;
}
