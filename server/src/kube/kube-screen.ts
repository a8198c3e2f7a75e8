/**
 * The Kubernetes source's own screening, before it writes: the Mesh feed's
 * rules (domain/spec-screen.ts), applied where the object at fault is still
 * known, so what is left out is named by its EndpointSlice or Service and the
 * field of that object (`EndpointSlice repro/oops-1`, `ports[0].port`), not
 * by the Canopy service it would have become. What it refuses is never
 * written; the feed's check stays the guarantee for every other writer.
 */
import type { Logger } from 'pino';
import type { FieldError } from '../domain/errors.js';
import type { ServiceSpec } from '../domain/service.js';
import { screenService, skipReason, type SkippedPart } from '../domain/spec-screen.js';
import type { EndpointOrigin, MappedServices } from '../policy/k8s-live.js';
import { InputSkips, logSkips, type InputSkip } from '../store/input-skips.js';

/**
 * One source's screening, Service by Service (`namespace/name`): what it leaves out goes to the skips
 * registry under the Service's scope (replacing that Service's last entries), and a Service whose mapping
 * failed is counted as rejected until it maps again.
 */
export class KubeScreen {
  readonly skips: InputSkips;
  private readonly rejected = new Map<string, string>();

  /** Without a shared registry (one source alone), its own, logged once per entry. */
  constructor(skips: InputSkips | undefined, log: Logger) {
    this.skips = skips ?? new InputSkips();
    if (!skips) logSkips(this.skips, log);
  }

  /** Kubernetes Services not written because of an error. */
  get refused(): number {
    return this.rejected.size;
  }

  /** The specs to write for the Service (none when it is gone); undefined when it is refused whole. */
  screen(key: string, mapped: MappedServices | undefined): ServiceSpec[] | undefined {
    const skipped = new Map<string, InputSkip>();
    const kept = (mapped?.specs ?? []).flatMap((spec) => {
      const screened = screenKubeSpec(key, spec, mapped?.origins?.get(spec.name), skipped);
      return screened ? [screened] : [];
    });
    if (mapped && mapped.errors.length > 0) {
      mappingSkips(key, mapped.errors, skipped);
      this.rejected.set(key, mapped.errors.map((e) => `${e.path}: ${e.message}`).join('; '));
    } else this.rejected.delete(key);
    this.skips.replace(kubeScope(key), skipped);
    return mapped && mapped.errors.length > 0 && mapped.specs.length === 0 ? undefined : kept;
  }
}

/** The skip entries' scope for one Kubernetes Service (`namespace/name`). */
export function kubeScope(key: string): string {
  return `kube:${key}`;
}

/** A mapped spec screened: what to write (undefined: nothing), and the entries of what was left out. */
export function screenKubeSpec(
  key: string,
  spec: ServiceSpec,
  origins: ReadonlyMap<string, EndpointOrigin> | undefined,
  into: Map<string, InputSkip>,
): ServiceSpec | undefined {
  const screened = screenService(spec);
  for (const p of screened.skipped) {
    const origin = p.endpoint !== undefined ? origins?.get(p.endpoint) : undefined;
    const object = origin ? `EndpointSlice ${origin.slice}` : `Service ${key}`;
    const path = origin ? slicePath(p, origin) : p.path;
    const id = `${object}|${path}`;
    const held = into.get(id);
    if (held) {
      into.set(id, { ...held, endpoints: (held.endpoints ?? 1) + 1 });
      continue;
    }
    into.set(id, {
      source: 'kube',
      object,
      service: spec.name,
      path,
      ...(p.value !== undefined ? { value: p.value } : {}),
      message: p.message,
      reason: skipReason(p.path),
      left: screened.spec ? 'endpoint' : 'service',
      ...(screened.spec ? { endpoints: 1 } : {}),
    });
  }
  return screened.spec;
}

/** A Service's mapping errors (`Service shop/web: metadata.annotations[…]`) as entries: its last good state stays. */
export function mappingSkips(key: string, errors: readonly FieldError[], into: Map<string, InputSkip>): void {
  const slash = key.indexOf('/');
  const service = `${key.slice(slash + 1)}.${key.slice(0, slash)}`;
  for (const e of errors) {
    const colon = e.path.indexOf(': ');
    const object = colon > 0 ? e.path.slice(0, colon) : `Service ${key}`;
    const path = colon > 0 ? e.path.slice(colon + 2) : e.path;
    into.set(`${object}|${path}`, {
      source: 'kube',
      object,
      service,
      path,
      message: e.message,
      reason: `service.${/^[a-z]+/i.exec(path)?.[0] ?? 'other'}`,
      left: 'service',
    });
  }
}

/** The slice's own field: the port of `ports[i]`, the address of `endpoints[j]`, else the endpoint. */
function slicePath(p: SkippedPart, o: EndpointOrigin): string {
  const field = p.path.replace(/^endpoints\[\d+\]\.?/, '');
  if (field === 'port') return `ports[${o.port}].port`;
  if (field === 'address') return `endpoints[${o.endpoint}].addresses[0]`;
  return `endpoints[${o.endpoint}]${field ? `.${field}` : ''}`;
}
