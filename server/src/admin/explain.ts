/**
 * GET /debug/explain?service=…&region=…&zone=…&subzone=…&network=…&node=…&cluster=…&label.KEY=VALUE
 * explains the CLA a client there gets. With `policy=` (URL-encoded YAML or
 * JSON), or the same document as a POST body, it also explains the CLA under
 * that policy and lists the endpoints whose place would change. The document
 * is a Canopy `loadBalancing` object, a Canopy service entry, or Istio, Kuma
 * or Kubernetes documents (through their importers); endpoints stay the
 * service's own.
 */
import type { FastifyInstance } from 'fastify';
import { CanopyError, ValidationError, type FieldError } from '../domain/errors.js';
import { explain, explainChange } from '../domain/explain.js';
import { explainLoad } from '../domain/load/load-explain.js';
import type { Placement } from '../domain/locality.js';
import { Mesh, type ServiceState } from '../domain/mesh.js';
import { parseServiceSpec, serviceSpecToJson } from '../domain/spec.js';
import type { AdminDeps } from './deps.js';
import { YAML_TYPES } from './http-errors.js';

/** The YAML parser and the policy importers, loaded on the first proposed policy rather than at startup. */
type PolicyText = { parse: (text: string) => unknown } & typeof import('../policy/import.js');
let policyText: Promise<PolicyText> | undefined;
const loadPolicyText = (): Promise<PolicyText> =>
  (policyText ??= Promise.all([import('js-yaml'), import('../policy/import.js')]).then(([yaml, policy]) => ({
    ...policy,
    parse: (text: string) => yaml.load(text),
  })));

const PARAMS = ['service', 'region', 'zone', 'subzone', 'network', 'node', 'cluster', 'policy'] as const;
type Param = (typeof PARAMS)[number];
type Query = Record<string, string | string[]>;
const ISTIO_NETWORK_LABEL = 'topology.istio.io/network';
const ISTIO_CLUSTER_LABEL = 'topology.istio.io/cluster';

export function explainRoutes(deps: AdminDeps) {
  return async (app: FastifyInstance): Promise<void> => {
    // A proposed policy may be posted as YAML as well as JSON.
    app.addContentTypeParser([...YAML_TYPES], { parseAs: 'string' }, (_req, body, done) => done(null, body));
    const handle = async (query: Query, body: unknown) => {
      const q = readQuery(query);
      const service = deps.mesh.get(q.service);
      if (!service) throw new CanopyError('CANOPY_SERVICE_NOT_FOUND', `service "${q.service}" not found`);
      const doc = q.policy ?? body;
      if (doc === undefined || doc === null || doc === '') {
        // The key the cache really holds this client's CLA under.
        const entry = deps.claCache.lookup(service, q.placement);
        const load = explainLoad(service, q.placement, deps.load?.(service.name));
        return { ...explain(service, q.placement), cacheKey: entry.key, ...(load ? { load } : {}) };
      }
      const warnings: string[] = [];
      const proposed = proposedService(service, doc, await loadPolicyText(), warnings);
      return explainChange(service, proposed, q.placement, warnings);
    };
    app.get<{ Querystring: Query }>('/debug/explain', async (req) => handle(req.query, undefined));
    app.post<{ Querystring: Query; Body: unknown }>('/debug/explain', async (req) => handle(req.query, req.body));
  };
}

function readQuery(query: Query): { service: string; placement: Placement; policy?: string } {
  const errors: FieldError[] = [];
  const one: Partial<Record<Param, string>> = {};
  const labels: [string, string][] = [];
  for (const [key, value] of Object.entries(query)) {
    const path = `query.${key}`;
    if (typeof value !== 'string') errors.push({ path, message: 'is given more than once' });
    else if (key.startsWith('label.') && key.length > 'label.'.length) labels.push([key.slice('label.'.length), value]);
    else if ((PARAMS as readonly string[]).includes(key)) one[key as Param] = value;
    else errors.push({ path, message: `unknown parameter (expected ${PARAMS.join(', ')} or label.<key>)` });
  }
  if (!one.service) errors.push({ path: 'query.service', message: 'is required' });
  if (errors.length > 0 || !one.service) throw new ValidationError('CANOPY_BAD_REQUEST', errors);
  // fromEntries defines own properties: a "__proto__" label stays a label.
  const byKey = Object.fromEntries(labels);
  const label = (k: string) => (Object.hasOwn(byKey, k) ? byKey[k] : undefined);
  return {
    service: one.service,
    placement: {
      locality: { region: one.region ?? '', zone: one.zone ?? '', subzone: one.subzone ?? '' },
      // Istio's topology labels name the network and cluster, as a sidecar's NETWORK and CLUSTER_ID do.
      network: one.network ?? label(ISTIO_NETWORK_LABEL) ?? '',
      node: one.node ?? '',
      cluster: one.cluster ?? label(ISTIO_CLUSTER_LABEL) ?? '',
      labels: byKey,
    },
    ...(one.policy !== undefined ? { policy: one.policy } : {}),
  };
}

/** The service as it would be under the proposed policy document. */
function proposedService(current: ServiceState, doc: unknown, text: PolicyText, warnings: string[]): ServiceState {
  let value = doc;
  if (typeof doc === 'string') {
    if (text.holdsPolicyDocuments(doc)) return fromImport(current, doc, text, warnings);
    try {
      value = text.parse(doc);
    } catch (err) {
      throw new ValidationError('CANOPY_BAD_REQUEST', [
        { path: 'policy', message: `not YAML or JSON: ${(err as Error).message.split('\n')[0]}` },
      ]);
    }
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new ValidationError('CANOPY_BAD_REQUEST', [
      {
        path: 'policy',
        message: 'must be a loadBalancing object, a service entry, or Istio, Kuma or Kubernetes documents',
      },
    ]);
  }
  const o = value as Record<string, unknown>;
  if (o['loadBalancing'] !== undefined && typeof o['name'] === 'string' && o['name'] !== current.name)
    warnings.push(`the proposed service entry is "${o['name']}", explained for "${current.name}"`);
  const entry = o['loadBalancing'] !== undefined ? o['loadBalancing'] : o;
  return withLoadBalancing(
    current,
    entry,
    (p) => `policy${o['loadBalancing'] !== undefined ? '.loadBalancing' : ''}${p}`,
  );
}

function fromImport(current: ServiceState, text: string, policy: PolicyText, warnings: string[]): ServiceState {
  const imported = policy.importDocuments([{ name: 'policy', text }]);
  if (!imported.result.ok) throw new ValidationError('CANOPY_BAD_REQUEST', imported.result.errors);
  const services = imported.result.value.services;
  const match = services.find((s) => s.name === current.name) ?? (services.length === 1 ? services[0] : undefined);
  if (!match) {
    throw new ValidationError('CANOPY_BAD_REQUEST', [
      {
        path: 'policy',
        message: `names no service "${current.name}" (imported: ${services.map((s) => s.name).join(', ') || 'none'})`,
      },
    ]);
  }
  if (match.name !== current.name)
    warnings.push(`the proposed policy is for "${match.name}", explained for "${current.name}" as if it were its own`);
  for (const n of imported.notes) warnings.push(`import note: ${n.path}: ${n.message}`);
  return withLoadBalancing(current, serviceSpecToJson(match)['loadBalancing'], (p) => `policy${p}`);
}

function withLoadBalancing(
  current: ServiceState,
  loadBalancing: unknown,
  pathOf: (rest: string) => string,
): ServiceState {
  const parsed = parseServiceSpec({ ...serviceSpecToJson(current.spec), loadBalancing });
  if (!parsed.ok) {
    const errors = parsed.errors.map((e) => ({ ...e, path: pathOf(e.path.replace(/^loadBalancing/, '')) }));
    throw new ValidationError('CANOPY_BAD_REQUEST', errors);
  }
  const mesh = new Mesh();
  mesh.put(parsed.value);
  return mesh.get(current.name)!;
}
