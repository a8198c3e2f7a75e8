/**
 * The reader every config and admin input goes through: it collects each
 * problem with the path of the field at fault instead of throwing.
 */
import type { FieldError, ValidationResult } from './errors.js';
import { canonicalIp, isIp, unusableAddress } from './ip.js';

export type Obj = Record<string, unknown>;

/** Collects the errors found while reading one input. */
export class Reader {
  readonly errors: FieldError[] = [];

  fail(path: string, message: string): undefined {
    this.errors.push({ path, message });
    return undefined;
  }

  result<T>(value: T): ValidationResult<T> {
    return this.errors.length > 0 ? this.failed() : { ok: true, value };
  }

  failed(): { ok: false; errors: readonly FieldError[] } {
    return { ok: false, errors: this.errors };
  }

  /** Reads `o[key]` when present; undefined when absent (the caller applies its default). */
  optional<T>(o: Obj, key: string, path: string, read: (v: unknown, path: string) => T | undefined): T | undefined {
    const v = o[key];
    return v === undefined ? undefined : read(v, join(path, key));
  }

  object(v: unknown, path: string, allowed: readonly string[]): Obj | undefined {
    if (!isObject(v)) return this.fail(path, `must be an object, got ${describe(v)}`);
    for (const k of Object.keys(v)) {
      if (!allowed.includes(k)) this.fail(join(path, k), `unknown field (expected one of: ${allowed.join(', ')})`);
    }
    return v;
  }

  // Arrow properties, so they can be passed to optional() as they are.
  readonly string = (v: unknown, path: string): string | undefined =>
    typeof v === 'string' ? v : this.fail(path, `must be a string, got ${describe(v)}`);

  readonly bool = (v: unknown, path: string): boolean | undefined =>
    typeof v === 'boolean' ? v : this.fail(path, `must be true or false, got ${describe(v)}`);

  /** An address a client can connect to, in its canonical spelling. */
  readonly ip = (v: unknown, path: string): string | undefined => {
    if (typeof v !== 'string' || !isIp(v))
      return this.fail(path, `must be an IPv4 or IPv6 address literal, got ${describe(v)}`);
    const unusable = unusableAddress(v);
    if (unusable)
      return this.fail(path, `must be a unicast address a client can connect to, got ${describe(v)}: ${unusable}`);
    return canonicalIp(v);
  };

  int(v: unknown, path: string, min: number, max: number): number | undefined {
    if (typeof v === 'number' && Number.isInteger(v) && v >= min && v <= max) return v;
    return this.fail(path, `must be an integer from ${min} to ${max}, got ${describe(v)}`);
  }

  oneOf<T extends string>(v: unknown, path: string, values: readonly T[]): T | undefined {
    if (typeof v === 'string' && (values as readonly string[]).includes(v)) return v as T;
    return this.fail(path, `must be one of ${values.join(', ')}, got ${describe(v)}`);
  }
}

export function isObject(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export function join(path: string, key: string): string {
  return path ? `${path}.${key}` : key;
}

/** The received value, briefly, for error messages. */
export function describe(v: unknown): string {
  if (v === undefined) return 'nothing';
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'a list';
  if (typeof v === 'string') return JSON.stringify(v.length > 40 ? `${v.slice(0, 40)}…` : v);
  if (typeof v === 'object') return 'an object';
  return `${typeof v} ${String(v)}`;
}
