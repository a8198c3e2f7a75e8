/**
 * A bulk change of one service's endpoints through the admin API (`PATCH .../endpoints`): whole endpoints
 * upserted in the config's shape, keys removed, health or weight patched, each problem with its path.
 */
import { endpointKey, type Endpoint } from './service.js';
import { describe, join, Reader } from './reader.js';
import type { ValidationResult } from './errors.js';
import { parseEndpointKey, patchEndpoint, PATCH_KEYS, readEndpoints } from './spec.js';

export interface EndpointChanges {
  readonly upserts: readonly Endpoint[];
  readonly removals: readonly string[];
}

const CHANGES_KEYS = ['upsert', 'remove', 'patch'];
const ENDPOINT_PATCH_KEYS = ['endpoint', ...PATCH_KEYS];

/**
 * A bulk change of one service's endpoints: `upsert` whole endpoints (config
 * shape), `remove` keys, `patch` the health/weight of existing ones. Every
 * problem is reported with its path; `current` looks up held endpoints by key.
 */
export function parseEndpointChanges(
  input: unknown,
  current: (key: string) => Endpoint | undefined,
): ValidationResult<EndpointChanges> {
  const r = new Reader();
  const o = r.object(input, '', CHANGES_KEYS);
  if (!o) return r.failed();
  const upserts = new Map<string, Endpoint>();
  const removals: string[] = [];
  const touched = (key: string, p: string) => {
    if (upserts.has(key) || removals.includes(key)) r.fail(p, `endpoint ${key} appears more than once in this change`);
  };
  r.optional(o, 'upsert', '', (x, p) =>
    readEndpoints(r, x, p)?.forEach((ep, i) => {
      touched(endpointKey(ep), `${p}[${i}]`);
      upserts.set(endpointKey(ep), ep);
    }),
  );
  r.optional(o, 'remove', '', (x, p) =>
    Array.isArray(x)
      ? x.forEach((k, i) => {
          const key = typeof k === 'string' ? parseEndpointKey(k) : undefined;
          if (key === undefined)
            return r.fail(`${p}[${i}]`, `must be "address:port" (IPv6 as "[address]:port"), got ${describe(k)}`);
          touched(key, `${p}[${i}]`);
          removals.push(key);
        })
      : r.fail(p, `must be a list of "address:port" keys, got ${describe(x)}`),
  );
  r.optional(o, 'patch', '', (x, p) =>
    Array.isArray(x)
      ? x.forEach((raw, i) => {
          const at = `${p}[${i}]`;
          const e = r.object(raw, at, ENDPOINT_PATCH_KEYS);
          if (!e) return;
          const key = typeof e['endpoint'] === 'string' ? parseEndpointKey(e['endpoint']) : undefined;
          const held = key !== undefined ? current(key) : undefined;
          if (key === undefined || !held) {
            return r.fail(join(at, 'endpoint'), `must name an endpoint of the service, got ${describe(e['endpoint'])}`);
          }
          const { endpoint: _named, ...change } = e;
          const patched = patchEndpoint(held, change);
          if (!patched.ok) for (const f of patched.errors) r.fail(join(at, f.path), f.message);
          else {
            touched(key, at);
            upserts.set(key, patched.value);
          }
        })
      : r.fail(p, `must be a list of {endpoint, health?, weight?}, got ${describe(x)}`),
  );
  return r.result({ upserts: [...upserts.values()], removals });
}
