/**
 * Who may read what on the xDS port, by the SPIFFE ID of the client's
 * certificate (mTLS). A rule names a trust domain and a path pattern, and
 * the services its clients may read (name patterns) and whether they may
 * call CSDS. A client reads the union of the rules its identity matches;
 * one that matches none reads nothing. Without a rule set every client reads
 * every service (as before rules existed). The file is validated with ajv
 * and every error names its field path.
 *
 *   rules:
 *     - spiffe: spiffe://tenant-a.example/ns/*\/**   # `*` one path segment, `**` any number
 *       services: [a-*, shared]                      # `*` any characters of a service name
 *       csds: true                                   # may call CSDS (default false)
 */
import { Ajv, type ErrorObject } from 'ajv';
import type { FieldError, ValidationResult } from '../domain/errors.js';

export interface ReadRule {
  readonly spiffe: string;
  readonly services: readonly string[];
  readonly csds?: boolean;
}

export interface ReadRules {
  readonly rules: readonly ReadRule[];
}

const SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['rules'],
  properties: {
    rules: {
      type: 'array',
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['spiffe', 'services'],
        properties: {
          spiffe: {
            type: 'string',
            // A trust domain as SPIFFE defines it (no wildcard: a rule never spans trust domains), then a path.
            pattern: "^spiffe://[a-z0-9._-]+(/[A-Za-z0-9._~%!$&'()+,;=:@*-]+)*$",
          },
          services: {
            type: 'array',
            items: { type: 'string', pattern: '^[A-Za-z0-9._*-]{1,253}$' },
          },
          csds: { type: 'boolean' },
        },
      },
    },
  },
} as const;

let validate: ReturnType<Ajv['compile']> | undefined;

/** The rule set in `value` (a parsed YAML or JSON document), or every problem with its field path. */
export function parseReadRules(value: unknown): ValidationResult<ReadRules> {
  validate ??= new Ajv({ allErrors: true }).compile(SCHEMA);
  if (validate(value)) return { ok: true, value: value as ReadRules };
  return { ok: false, errors: (validate.errors ?? []).map(fieldError) };
}

function fieldError(e: ErrorObject): FieldError {
  const path = e.instancePath
    .split('/')
    .slice(1)
    .map((seg, i) => (/^\d+$/.test(seg) ? `[${seg}]` : `${i === 0 ? '' : '.'}${seg}`))
    .join('');
  if (e.keyword === 'additionalProperties') {
    const extra = (e.params as { additionalProperty: string }).additionalProperty;
    return { path: path ? `${path}.${extra}` : extra, message: 'unknown field' };
  }
  if (e.keyword === 'required') {
    const missing = (e.params as { missingProperty: string }).missingProperty;
    return { path: path ? `${path}.${missing}` : missing, message: 'is required' };
  }
  if (e.keyword === 'pattern' && path.endsWith('.spiffe')) {
    return { path, message: 'must be spiffe://TRUST-DOMAIN/PATH (a lower-case trust domain, no wildcard in it)' };
  }
  if (e.keyword === 'pattern') {
    return { path, message: 'must be a service name pattern: letters, digits, ".", "_", "-" and "*" (any characters)' };
  }
  return { path, message: e.message ?? 'is invalid' };
}

/** What one client may read: every service, or those its rules allow. */
export interface ReadGrant {
  readonly all: boolean;
  readonly csds: boolean;
  service(name: string): boolean;
}

const EVERYTHING: ReadGrant = { all: true, csds: false, service: () => true };

export class ReadAccess {
  private readonly compiled: readonly { identity: RegExp; services: RegExp[]; csds: boolean }[];

  /** `rules` undefined: every client reads everything (CSDS still needs the admin token). */
  constructor(readonly rules?: ReadRules) {
    this.compiled = (rules?.rules ?? []).map((r) => ({
      identity: spiffePattern(r.spiffe),
      services: r.services.map(namePattern),
      csds: r.csds === true,
    }));
  }

  get restricted(): boolean {
    return this.rules !== undefined;
  }

  /** What a client holding these SPIFFE IDs may read. */
  grant(ids: readonly string[]): ReadGrant {
    if (!this.rules) return EVERYTHING;
    const matched = this.compiled.filter((r) => ids.some((id) => r.identity.test(id)));
    const patterns = matched.flatMap((r) => r.services);
    const seen = new Map<string, boolean>();
    return {
      all: false,
      csds: matched.some((r) => r.csds),
      service: (name) => {
        let ok = seen.get(name);
        if (ok === undefined) {
          ok = patterns.some((p) => p.test(name));
          // Names come from what clients subscribe to: remember a bounded number.
          if (seen.size < 10_000) seen.set(name, ok);
        }
        return ok;
      },
    };
  }
}

const escape = (s: string) => s.replace(/[.+?^${}()|[\]\\]/g, '\\$&');

/** `spiffe://td/a/*\/**`: the trust domain exactly, `*` one path segment, `**` any number of them. */
function spiffePattern(rule: string): RegExp {
  const [, domain = '', path = ''] = /^spiffe:\/\/([^/]+)(.*)$/.exec(rule) ?? [];
  const body = path
    .split('/')
    .slice(1)
    .map((seg) => (seg === '**' ? '(?:/[^/]+)*' : `/${seg === '*' ? '[^/]+' : escape(seg).replace(/\*/g, '[^/]*')}`))
    .join('');
  return new RegExp(`^spiffe://${escape(domain)}${body}$`);
}

function namePattern(pattern: string): RegExp {
  return new RegExp(`^${pattern.split('*').map(escape).join('.*')}$`);
}
