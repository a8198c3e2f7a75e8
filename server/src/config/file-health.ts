/**
 * Health marks made through the API (`canopy health`, PATCH) survive a reload of an edited file entry
 * (docs/configuration.md, "Reloading the file"): the API is the operator's later word. An endpoint the
 * new entry lists, whose health the file did not change since it was last applied, keeps the health the
 * store holds for it. Where the file's last entry is not known to this process (the start found the
 * file already applied and did not parse it), the mark cannot be told from the file's own old value:
 * the file's value is written and the endpoints are reported, to be logged at warn level.
 */
import { endpointKey, type Endpoint, type Health, type ServiceSpec } from '../domain/service.js';

/** Per service the file lists, the health it gives endpoints that are not healthy. */
export type FileHealth = ReadonlyMap<string, ReadonlyMap<string, Health>>;

/** An endpoint whose stored health differs from the file's new entry. */
export interface HealthMark {
  readonly service: string;
  readonly endpoint: string;
  /** What the store held (the API's mark). */
  readonly held: Health;
  /** What the file's new entry says. */
  readonly file: Health;
}

export interface HealthCarry {
  /** Marks kept over the file's entry. */
  readonly kept: HealthMark[];
  /** Marks the file's entry replaced: its last entry was unknown, or it changed that endpoint's health too. */
  readonly reset: HealthMark[];
}

export function fileHealthOf(specs: readonly ServiceSpec[]): FileHealth {
  const out = new Map<string, Map<string, Health>>();
  for (const spec of specs) {
    const marks = new Map<string, Health>();
    for (const e of spec.endpoints) if (e.health !== 'healthy') marks.set(endpointKey(e), e.health);
    out.set(spec.name, marks);
  }
  return out;
}

/**
 * The file's new entry `spec` as written over `stored`: the stored health of each endpoint it lists where
 * the API set it and the file left it as it was in `before` (the file's last entry's marks, if known).
 */
export function carryHealth(
  spec: ServiceSpec,
  stored: ServiceSpec,
  before: ReadonlyMap<string, Health> | undefined,
  out: HealthCarry,
): ServiceSpec {
  const held = new Map<string, Health>();
  for (const e of stored.endpoints) held.set(endpointKey(e), e.health);
  let carried = false;
  const endpoints = spec.endpoints.map((e): Endpoint => {
    const key = endpointKey(e);
    const now = held.get(key);
    if (now === undefined || now === e.health) return e;
    const mark = { service: spec.name, endpoint: key, held: now, file: e.health };
    const was = before === undefined ? undefined : (before.get(key) ?? 'healthy');
    // The store holds the file's old value: the file changed it, and its new word is written.
    if (was === now) return e;
    if (was === undefined || e.health !== was) {
      out.reset.push(mark);
      return e;
    }
    out.kept.push(mark);
    carried = true;
    return { ...e, health: now };
  });
  return carried ? { ...spec, endpoints } : spec;
}

/** `web/10.0.0.1:80 unhealthy (file: healthy), …`, the first `max` of them and a count of the rest. */
export function describeMarks(marks: readonly HealthMark[], max = 20): string {
  const shown = marks.slice(0, max).map((m) => `${m.service}/${m.endpoint} ${m.held} (file: ${m.file})`);
  return marks.length > max ? `${shown.join(', ')} and ${marks.length - max} more` : shown.join(', ');
}
