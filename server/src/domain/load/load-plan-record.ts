/**
 * The load-aware plans as kept in the store, so that a restarted replica serves the weights it served
 * before instead of the plain failover CLA (serve/load-keep.ts writes and reads it). Per service: the
 * scopes its paths are values at, the weights' epoch, and the damping state by paths (load-aggregate.ts's
 * SharedPlan), from which the weights follow as they do every interval. What is read back is untrusted
 * (another version, a damaged value, another replica's write): it is validated whole, with field paths,
 * and a record that fails is not used. Pure.
 */
import type { FieldError, ValidationResult } from '../errors.js';
import type { LocalityTree } from '../locality-tree.js';
import { exportPlan, importPlan, pathKey, type SharedPlan } from './load-aggregate.js';
import type { LoadPlanState } from './load-plan.js';

export const PLAN_RECORD_FORMAT = 1;
/** Bounds on what is read back: far above any real mesh, small enough to refuse garbage quickly. */
const MAX_BYTES = 64 * 1024 * 1024;
const MAX_SERVICES = 100_000;
const MAX_NODES = 100_000;
const MAX_SHARES = 10_000;
const MAX_SCOPES = 16;
const MAX_NAME = 253;
/** Shares of one node sum to 1; rounding may leave them a little off. */
const SUM_SLACK = 1e-6;

export interface ServicePlanRecord {
  readonly scopes: readonly string[];
  readonly epoch: number;
  readonly plan: SharedPlan;
}

export interface PlanRecord {
  readonly format: typeof PLAN_RECORD_FORMAT;
  /** Wall-clock milliseconds when it was written. */
  readonly at: number;
  readonly services: Readonly<Record<string, ServicePlanRecord>>;
}

/** One service's plan, by paths, to keep. */
export function planRecordOf(tree: LocalityTree, state: LoadPlanState): ServicePlanRecord {
  return { scopes: [...tree.scopes], epoch: state.epoch, plan: exportPlan(tree, state) };
}

/**
 * A kept plan in this tree's node ids, with the weights it gives (each share × 1,000, at least 1, as every
 * interval's plan gives them); undefined when the service's scopes changed or nothing of it is in the tree.
 */
export function restorePlan(
  tree: LocalityTree,
  kept: ServicePlanRecord,
  weightScale: number,
): LoadPlanState | undefined {
  if (pathKey(kept.scopes) !== pathKey(tree.scopes)) return undefined;
  const { shares, drained } = importPlan(tree, kept.plan);
  const weights = new Map<number, Map<number, number>>();
  for (const [node, m] of shares) {
    const w = new Map<number, number>();
    for (const [leaf, share] of m) if (share > 0) w.set(leaf, Math.max(1, Math.round(share * weightScale)));
    if (w.size > 0) weights.set(node, w);
  }
  if (weights.size === 0) return undefined;
  return { epoch: kept.epoch, shares, drained, load: { epoch: kept.epoch, weights } };
}

/** Parses and validates a kept record; every problem is reported with its path. */
export function parsePlanRecord(text: string): ValidationResult<PlanRecord> {
  const errors: FieldError[] = [];
  if (text.length > MAX_BYTES) return fail('', `is ${text.length} bytes, more than ${MAX_BYTES}`);
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    return fail('', `is not JSON: ${(err as Error).message}`);
  }
  if (!isObject(raw)) return fail('', 'must be an object');
  if (raw['format'] !== PLAN_RECORD_FORMAT) return fail('format', `must be ${PLAN_RECORD_FORMAT}`);
  if (!isCount(raw['at'])) errors.push({ path: 'at', message: 'must be a non-negative integer' });
  const services = raw['services'];
  if (!isObject(services)) return fail('services', 'must be an object', errors);
  const names = Object.keys(services);
  if (names.length > MAX_SERVICES) return fail('services', `holds more than ${MAX_SERVICES} services`, errors);
  for (const name of names) {
    if (name.length === 0 || name.length > MAX_NAME) errors.push({ path: `services`, message: `bad name "${name}"` });
    checkService(services[name], `services.${name}`, errors);
  }
  return errors.length > 0 ? { ok: false, errors } : { ok: true, value: raw as unknown as PlanRecord };
}

function checkService(x: unknown, at: string, errors: FieldError[]): void {
  if (!isObject(x)) return void errors.push({ path: at, message: 'must be an object' });
  const scopes = x['scopes'];
  if (!isStrings(scopes, MAX_SCOPES) || scopes.length === 0)
    errors.push({ path: `${at}.scopes`, message: `must be 1 to ${MAX_SCOPES} names` });
  if (!isCount(x['epoch'])) errors.push({ path: `${at}.epoch`, message: 'must be a non-negative integer' });
  const plan = x['plan'];
  if (!isObject(plan)) return void errors.push({ path: `${at}.plan`, message: 'must be an object' });
  const depth = Array.isArray(scopes) ? scopes.length : MAX_SCOPES;
  if (!isStrings(plan['drained'], MAX_NODES, MAX_NAME * MAX_SCOPES))
    errors.push({ path: `${at}.plan.drained`, message: 'must be a list of locality paths' });
  const nodes = plan['nodes'];
  if (!Array.isArray(nodes) || nodes.length > MAX_NODES)
    return void errors.push({ path: `${at}.plan.nodes`, message: `must be a list of at most ${MAX_NODES}` });
  nodes.forEach((n: unknown, i) => checkNode(n, `${at}.plan.nodes[${i}]`, depth, errors));
}

function checkNode(n: unknown, at: string, depth: number, errors: FieldError[]): void {
  if (!isObject(n)) return void errors.push({ path: at, message: 'must be an object' });
  if (!isStrings(n['node'], depth)) errors.push({ path: `${at}.node`, message: `must be a path of at most ${depth}` });
  const shares = n['shares'];
  if (!Array.isArray(shares) || shares.length > MAX_SHARES)
    return void errors.push({ path: `${at}.shares`, message: `must be a list of at most ${MAX_SHARES}` });
  let sum = 0;
  shares.forEach((s: unknown, j) => {
    const sat = `${at}.shares[${j}]`;
    if (!isObject(s)) return void errors.push({ path: sat, message: 'must be an object' });
    if (!isStrings(s['leaf'], depth) || (s['leaf'] as unknown[]).length !== depth)
      errors.push({ path: `${sat}.leaf`, message: `must be a path of ${depth}` });
    const share = s['share'];
    if (typeof share !== 'number' || !Number.isFinite(share) || share < 0 || share > 1)
      errors.push({ path: `${sat}.share`, message: `must be a number from 0 to 1, not ${String(share)}` });
    else sum += share;
  });
  if (sum > 1 + SUM_SLACK) errors.push({ path: `${at}.shares`, message: `sum to ${sum}, more than 1` });
}

function fail(path: string, message: string, before: readonly FieldError[] = []): ValidationResult<never> {
  return { ok: false, errors: [...before, { path, message }] };
}

function isObject(x: unknown): x is Record<string, unknown> {
  return typeof x === 'object' && x !== null && !Array.isArray(x);
}

function isCount(x: unknown): x is number {
  return typeof x === 'number' && Number.isSafeInteger(x) && x >= 0;
}

function isStrings(x: unknown, max: number, maxLength = MAX_NAME): x is string[] {
  return (
    Array.isArray(x) &&
    x.length <= max &&
    x.every((v) => typeof v === 'string' && v.length > 0 && v.length <= maxLength)
  );
}
