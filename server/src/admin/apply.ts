/**
 * `POST /api/v1/apply[?dryRun=true]` with `{ "services": [entry, …] }`: a set
 * of services made to hold as one write (what `canopy apply -f FILE` sends).
 * The whole set is validated against the server's state first: each entry as
 * a PUT would be (field paths `services[i].…`), names unique, and no listener
 * conflict among the set and the services it leaves in place. Any error
 * refuses the whole set (400, every error listed) and nothing is written;
 * otherwise every changed service is written in one store transaction
 * (Store.putAll), guarded by the revisions validated against, so a write
 * that came in between makes the set validate again. A dry run answers what
 * the real run would do, from the same checks, and writes nothing.
 */
import type { FastifyInstance } from 'fastify';
import { ValidationError, type FieldError } from '../domain/errors.js';
import { conflictsWith } from '../domain/outbound.js';
import { endpointKey, type ServiceSpec } from '../domain/service.js';
import { endpointToJson, parseServiceSpec, serviceSpecToJson } from '../domain/spec.js';
import { StoreConflict, type PutEntry, type StoredService } from '../store/store.js';
import type { AdminDeps } from './deps.js';

export type ApplyAction = 'created' | 'configured' | 'unchanged';

/** How often a set is validated again after a write came in between. */
const ATTEMPTS = 5;

export function applyRoute(app: FastifyInstance, { store, caughtUp }: AdminDeps): void {
  app.post<{ Querystring: { dryRun?: string } }>('/api/v1/apply', async (req) => {
    const dryRun = req.query.dryRun === 'true';
    const set = parseSet(req.body);
    for (let attempt = 1; ; attempt++) {
      const { services } = await store.list();
      const held = new Map(services.map((s) => [s.spec.name, s]));
      checkConflicts(set, services);
      const results = set.map((spec) => ({ name: spec.name, action: actionOf(held.get(spec.name), spec) }));
      const changed: PutEntry[] = set.flatMap((spec, i) =>
        results[i]!.action === 'unchanged'
          ? []
          : [{ spec, opts: { owner: 'api', keepFileDigest: true, ifRevision: held.get(spec.name)?.revision ?? 0 } }],
      );
      if (dryRun || changed.length === 0) return { dryRun, services: results };
      try {
        await caughtUp(await store.putAll(changed));
        return { dryRun, services: results };
      } catch (err) {
        if (!(err instanceof StoreConflict) || attempt >= ATTEMPTS) throw err;
      }
    }
  });
}

/** The body's entries as specs, or every error with its path under `services`. */
function parseSet(body: unknown): ServiceSpec[] {
  const entries = typeof body === 'object' && body !== null ? (body as { services?: unknown }).services : undefined;
  if (!Array.isArray(entries))
    throw new ValidationError('CANOPY_INVALID_SERVICE', [{ path: 'services', message: 'must be a list of services' }]);
  const errors: FieldError[] = [];
  const specs: ServiceSpec[] = [];
  const first = new Map<string, number>();
  entries.forEach((entry: unknown, i) => {
    const parsed = parseServiceSpec(entry);
    if (!parsed.ok) return errors.push(...parsed.errors.map((e) => under(i, e)));
    const seen = first.get(parsed.value.name);
    if (seen !== undefined)
      return errors.push({ path: `services[${i}].name`, message: `"${parsed.value.name}" is also services[${seen}]` });
    first.set(parsed.value.name, i);
    specs.push(parsed.value);
  });
  if (errors.length > 0) throw new ValidationError('CANOPY_INVALID_SERVICE', errors);
  return specs;
}

/**
 * Listener conflicts of the mesh the set would leave: each entry against the services it does not replace and
 * the entries before it (so a clash inside the set is reported once, on the later entry).
 */
function checkConflicts(set: readonly ServiceSpec[], services: readonly StoredService[]): void {
  const names = new Set(set.map((s) => s.name));
  const kept = services.flatMap((s) => (names.has(s.spec.name) ? [] : [s.spec]));
  const errors = set.flatMap((spec, i) => conflictsWith([...kept, ...set.slice(0, i)], spec).map((e) => under(i, e)));
  if (errors.length > 0) throw new ValidationError('CANOPY_INVALID_SERVICE', errors);
}

function actionOf(held: StoredService | undefined, spec: ServiceSpec): ApplyAction {
  if (!held) return 'created';
  return canonical(held.spec) === canonical(spec) ? 'unchanged' : 'configured';
}

/** A spec as JSON with its endpoints in key order: the store need not keep a file's order. */
function canonical(spec: ServiceSpec): string {
  const { endpoints, ...head } = serviceSpecToJson({ ...spec, endpoints: [] });
  void endpoints;
  const sorted = [...spec.endpoints].sort((a, b) => (endpointKey(a) < endpointKey(b) ? -1 : 1));
  return JSON.stringify([head, sorted.map(endpointToJson)]);
}

function under(i: number, e: FieldError): FieldError {
  return { path: e.path ? `services[${i}].${e.path}` : `services[${i}]`, message: e.message };
}
