/**
 * The admin API: built apart from listen() so tests drive it with inject().
 * Handlers throw CanopyErrors; the error handler is the one place a code
 * becomes an HTTP status, so every error has one shape,
 * `{ error: { code, message, fields? } }`, with a code from the table in docs/admin-api.md.
 */
import rateLimit from '@fastify/rate-limit';
import Fastify, { type FastifyBaseLogger, type FastifyError, type FastifyInstance, type FastifyReply } from 'fastify';
import type { ClaEntry } from '../domain/cla-cache.js';
import { CanopyError, ValidationError, type ErrorCode, type FieldError } from '../domain/errors.js';
import type { Placement } from '../domain/locality.js';
import type { LocalityTree, TreeNode } from '../domain/locality-tree.js';
import type { ServiceState } from '../domain/mesh.js';
import { conflictsWith } from '../domain/outbound.js';
import type { MeshView } from '../store/mesh-feed.js';
import type { EndpointView } from '../store/store.js';
import { endpointKey, MAX_TOTAL_WEIGHT, type Endpoint } from '../domain/service.js';
import {
  endpointToJson,
  parseEndpointKey,
  parseServiceSpec,
  patchEndpoint,
  serviceSpecToJson,
} from '../domain/spec.js';
import { parseEndpointChanges } from '../domain/endpoint-changes.js';
import { isWrite, registerAccessControl } from './access.js';
import { applyRoute } from './apply.js';
import { explainRoutes } from './explain.js';
import { clusterRoutes } from './kube-status.js';
import { skippedRoute } from './skipped.js';
import { frameworkError, methodsByPath, registerJsonParser } from './http-errors.js';
import { uiRoutes } from './ui.js';
import type { AdminDeps } from './deps.js';

export type { AdminDeps } from './deps.js';

export const DEFAULT_BODY_LIMIT = 16 * 1024 * 1024;
/** Route parameters up to this long reach the handler (a 253-character name, encoded IPv6 keys), longer ones get 414. */
const MAX_PARAM_LENGTH = 1024;

/** The HTTP status of each error code. A Record, so a new code cannot go unmapped. */
export const HTTP_STATUS: Readonly<Record<ErrorCode, number>> = {
  CANOPY_INVALID_CONFIG: 400,
  CANOPY_INVALID_SERVICE: 400,
  CANOPY_BAD_REQUEST: 400,
  CANOPY_SERVICE_NOT_FOUND: 404,
  CANOPY_ENDPOINT_NOT_FOUND: 404,
  CANOPY_NOT_FOUND: 404,
  CANOPY_CONFIG_UNREADABLE: 500,
  CANOPY_INTERNAL: 500,
  CANOPY_NOT_READY: 503,
  CANOPY_CONFLICT: 409,
  CANOPY_UNAUTHORIZED: 401,
  CANOPY_MISDIRECTED: 421,
  CANOPY_RATE_LIMITED: 429,
  CANOPY_STORE_FULL: 507,
  CANOPY_METHOD_NOT_ALLOWED: 405,
  CANOPY_UNSUPPORTED_MEDIA_TYPE: 415,
  CANOPY_BODY_TOO_LARGE: 413,
};

export function buildAdminApp(deps: AdminDeps): FastifyInstance {
  const options = {
    ...(deps.https ? { https: { cert: deps.https.cert, key: deps.https.key } } : {}),
    bodyLimit: deps.bodyLimit ?? DEFAULT_BODY_LIMIT,
    routerOptions: { maxParamLength: MAX_PARAM_LENGTH },
    // Errors the router raises before any route (a too-long parameter, a bad URL) keep the catalog's shape.
    frameworkErrors: (err: FastifyError, _req: unknown, reply: FastifyReply) =>
      sendError(reply, 'CANOPY_BAD_REQUEST', err.message, undefined, err.statusCode ?? 400),
  };
  const app = deps.logger
    ? Fastify({
        ...options,
        // Scrapes and probes would flood an info log: request lines (info) show only at debug.
        loggerInstance: (deps.logger.isLevelEnabled('debug')
          ? deps.logger
          : deps.logger.child({}, { level: 'warn' })) as FastifyBaseLogger,
      })
    : Fastify({ ...options, logger: false });
  const allowed = methodsByPath(app);
  registerJsonParser(app);
  app.setErrorHandler((err: FastifyError, req, reply) => {
    const known = err instanceof CanopyError ? err : frameworkError(err, req, options.bodyLimit);
    if (known)
      return sendError(reply, known.code, known.message, known instanceof ValidationError ? known.errors : undefined);
    // Fastify's own client errors (malformed JSON, wrong content type, body too large) keep their status.
    const status = err.statusCode ?? 500;
    if (status >= 400 && status < 500) return sendError(reply, 'CANOPY_BAD_REQUEST', err.message, undefined, status);
    req.log.error({ err }, 'admin request failed');
    return sendError(reply, 'CANOPY_INTERNAL', 'internal error');
  });
  app.setNotFoundHandler((req, reply) => {
    const methods = allowed(req.url);
    if (methods.length === 0) return sendError(reply, 'CANOPY_NOT_FOUND', `no route ${req.method} ${req.url}`);
    void reply.header('allow', methods.join(', '));
    return sendError(
      reply,
      'CANOPY_METHOD_NOT_ALLOWED',
      `${req.url.split('?')[0]} takes ${methods.join(', ')}, not ${req.method}`,
    );
  });
  registerAccessControl(app, deps.access ?? {}, app.log);
  void app.register(async (scope) => {
    const limit = deps.writeRateLimit ?? { max: 600, windowMs: 10_000 };
    await scope.register(rateLimit, {
      max: limit.max,
      timeWindow: limit.windowMs,
      allowList: (req) => !isWrite(req),
      errorResponseBuilder: (_req, ctx) =>
        new CanopyError(
          'CANOPY_RATE_LIMITED',
          `too many writes from this client (at most ${ctx.max}); retry in ${ctx.after}`,
        ),
    });
    serviceRoutes(scope, deps);
    bulkEndpointRoute(scope, deps);
    applyRoute(scope, deps);
  });
  debugRoutes(app, deps);
  skippedRoute(app, deps);
  void app.register(explainRoutes(deps));
  clusterRoutes(app, deps);
  healthRoutes(app, deps);
  uiRoutes(app, deps);
  return app;
}

function sendError(
  reply: FastifyReply,
  code: ErrorCode,
  message: string,
  fields?: readonly FieldError[],
  status = HTTP_STATUS[code],
): FastifyReply {
  return reply.code(status).send({ error: { code, message, ...(fields ? { fields } : {}) } });
}

type NameParams = { Params: { name: string } };

function serviceRoutes(app: FastifyInstance, deps: AdminDeps): void {
  const { store, mesh, caughtUp } = deps;
  app.get('/api/v1/services', async () => ({ services: mesh.list().map((s) => serviceSpecToJson(s.spec)) }));

  app.get<NameParams>('/api/v1/services/:name', async (req) =>
    serviceSpecToJson(serviceOf(mesh, req.params.name).spec),
  );

  app.put<NameParams & { Querystring: { dryRun?: string } }>('/api/v1/services/:name', async (req, reply) => {
    const spec = parseServiceBody(req.params.name, req.body);
    // Services an Envoy sidecar could not tell apart on one listener (domain/outbound.ts), as at config load.
    const others = mesh.list().flatMap((s) => (s.name === spec.name ? [] : [s.spec]));
    const conflicts = conflictsWith(others, spec);
    if (conflicts.length > 0) throw new ValidationError('CANOPY_INVALID_SERVICE', conflicts);
    const existed = (await store.get(spec.name)) !== undefined;
    // ?dryRun=true: every check above, nothing written (canopy apply --dry-run).
    if (req.query.dryRun === 'true') return reply.code(existed ? 200 : 201).send(serviceSpecToJson(spec));
    // The API takes the service over; the file's digest stays, so the file takes it back only when its entry changes.
    const revision = await store.put(spec, { owner: 'api', keepFileDigest: true });
    await caughtUp(revision);
    return reply.code(existed ? 200 : 201).send(serviceSpecToJson(spec));
  });

  app.delete<NameParams>('/api/v1/services/:name', async (req, reply) => {
    const revision = await store.delete(req.params.name);
    if (revision === undefined) throw serviceNotFound(req.params.name);
    await caughtUp(revision);
    return reply.code(204).send();
  });

  app.patch<{ Params: { name: string; endpoint: string } }>(
    '/api/v1/services/:name/endpoints/:endpoint',
    async (req) => {
      const name = req.params.name;
      // Any spelling of the address names the endpoint: [FD00::1]:80 is [fd00::1]:80.
      const key = parseEndpointKey(req.params.endpoint) ?? req.params.endpoint;
      let patched: Endpoint | undefined;
      // Read, patched and written as one store write: a concurrent PATCH or removal is never overwritten.
      const revision = await store.editEndpoints(name, (current) => {
        const held = current.get(key);
        if (!held) {
          throw new CanopyError(
            'CANOPY_ENDPOINT_NOT_FOUND',
            `service "${name}" has no endpoint ${key} (give address:port, IPv6 as [address]:port)`,
          );
        }
        const result = patchEndpoint(held, req.body);
        if (!result.ok) throw new ValidationError('CANOPY_INVALID_SERVICE', result.errors);
        checkWeightSum(current, [result.value], [], 'weight');
        patched = result.value;
        return { upserts: [result.value], removals: [] };
      });
      if (revision === undefined || !patched) throw serviceNotFound(name);
      await caughtUp(revision);
      return endpointToJson(patched);
    },
  );
}

/** Many endpoint changes of one service in one request and one store write (large services). */
function bulkEndpointRoute(app: FastifyInstance, { store, caughtUp }: AdminDeps): void {
  app.patch<NameParams>('/api/v1/services/:name/endpoints', async (req) => {
    const name = req.params.name;
    let summary: { upserted: number; removed: number; endpoints: number } | undefined;
    const revision = await store.editEndpoints(name, (current) => {
      const changes = parseEndpointChanges(req.body, (key) => current.get(key));
      if (!changes.ok) throw new ValidationError('CANOPY_INVALID_SERVICE', changes.errors);
      const { upserts, removals } = changes.value;
      checkWeightSum(current, upserts, removals, '');
      const added = upserts.filter((e) => current.get(endpointKey(e)) === undefined).length;
      const removed = removals.filter((k) => current.get(k) !== undefined).length;
      summary = { upserted: upserts.length, removed: removals.length, endpoints: current.size + added - removed };
      return changes.value;
    });
    if (revision === undefined || !summary) throw serviceNotFound(name);
    await caughtUp(revision);
    return { service: name, ...summary };
  });
}

/** A PATCH may not push the service's weight sum past what PUT accepts (xDS carries it as uint32). */
function checkWeightSum(
  current: EndpointView,
  upserts: readonly Endpoint[],
  removals: readonly string[],
  path: string,
): void {
  if (!upserts.some((e) => e.weight > (current.get(endpointKey(e))?.weight ?? 0))) return;
  let total = current.totalWeight();
  for (const e of upserts) total += e.weight - (current.get(endpointKey(e))?.weight ?? 0);
  for (const k of removals) total -= current.get(k)?.weight ?? 0;
  if (total > MAX_TOTAL_WEIGHT) {
    throw new ValidationError('CANOPY_INVALID_SERVICE', [
      {
        path,
        message:
          `this change makes the service's endpoint weights sum to ${total}; xDS carries a locality's weight and a ` +
          `priority's total as uint32, so they may sum to at most ${MAX_TOTAL_WEIGHT}`,
      },
    ]);
  }
}

/** A PUT body is a config entry whose name, if given, must be the one in the URL. */
function parseServiceBody(name: string, body: unknown) {
  const named = isObject(body) && body['name'] === undefined ? { ...body, name } : body;
  const parsed = parseServiceSpec(named);
  const errors: FieldError[] = parsed.ok ? [] : [...parsed.errors];
  if (isObject(body) && body['name'] !== undefined && body['name'] !== name) {
    errors.push({
      path: 'name',
      message: `must equal the name in the URL, "${name}", got ${JSON.stringify(body['name'])}`,
    });
  }
  if (!parsed.ok || errors.length > 0) throw new ValidationError('CANOPY_INVALID_SERVICE', errors);
  return parsed.value;
}

function debugRoutes(app: FastifyInstance, deps: AdminDeps): void {
  app.get<{ Querystring: Record<string, string | string[]> }>('/debug/cla', async (req) => {
    const { service, placement } = readPlacementQuery(req.query);
    return claPreview(deps.claCache.lookup(serviceOf(deps.mesh, service), placement));
  });

  app.get<{ Params: { service: string } }>('/debug/tree/:service', async (req) =>
    treeView(serviceOf(deps.mesh, req.params.service).tree),
  );

  app.get('/debug/clients', async () => ({ clients: deps.clients() }));

  // Load-aware balancing: reported load against capacity per locality, and the weights each client node gets.
  app.get<{ Params: { service: string } }>('/debug/load/:service', async (req) => {
    const s = serviceOf(deps.mesh, req.params.service);
    const la = s.spec.loadBalancing.loadAware;
    return { service: s.name, balancing: la?.balancing ?? 'off', ...(deps.load?.(s.name) ?? {}) };
  });
}

function healthRoutes(app: FastifyInstance, deps: AdminDeps): void {
  app.get('/healthz', async () => ({ status: 'ok' }));

  app.get('/readyz', async () => {
    const why = deps.notReady?.();
    if (why !== undefined) throw new CanopyError('CANOPY_NOT_READY', why);
    if (!deps.ready())
      throw new CanopyError('CANOPY_NOT_READY', 'starting, shutting down, or the store is unreachable');
    return { status: 'ready' };
  });

  app.get('/metrics', async (_req, reply) => {
    const body = await deps.registry.metrics();
    return reply.type(deps.registry.contentType).send(body);
  });
}

const PLACEMENT_PARAMS = ['service', 'region', 'zone', 'subzone', 'network', 'node', 'cluster'] as const;

/** /debug/cla's query → the placement to preview. Unknown and repeated parameters are errors, like config typos. */
function readPlacementQuery(query: Record<string, string | string[]>): { service: string; placement: Placement } {
  const one: Partial<Record<(typeof PLACEMENT_PARAMS)[number], string>> = {};
  const labels: [string, string][] = [];
  for (const [key, value] of Object.entries(query)) {
    if (typeof value !== 'string') throw badRequest(`query parameter "${key}" is given more than once`);
    if (key.startsWith('label.') && key.length > 'label.'.length) labels.push([key.slice('label.'.length), value]);
    else if ((PLACEMENT_PARAMS as readonly string[]).includes(key))
      one[key as (typeof PLACEMENT_PARAMS)[number]] = value;
    else throw badRequest(`unknown query parameter "${key}" (expected ${PLACEMENT_PARAMS.join(', ')} or label.<key>)`);
  }
  if (!one.service) throw badRequest('query parameter "service" is required');
  return {
    service: one.service,
    placement: {
      locality: { region: one.region ?? '', zone: one.zone ?? '', subzone: one.subzone ?? '' },
      network: one.network ?? '',
      node: one.node ?? '',
      cluster: one.cluster ?? '',
      labels: Object.fromEntries(labels),
    },
  };
}

/** What a client at the previewed placement would be sent, grouped by priority. */
function claPreview(entry: ClaEntry<{ readonly length: number }>) {
  const byPriority = new Map<number, object[]>();
  for (const g of entry.cla.groups) {
    let localities = byPriority.get(g.priority);
    if (!localities) byPriority.set(g.priority, (localities = []));
    localities.push({
      locality: { region: g.locality.region, zone: g.locality.zone, subzone: g.locality.subzone },
      weight: g.weight,
      endpoints: g.endpoints.map((e) => ({ address: e.address, port: e.port, weight: e.weight })),
    });
  }
  return {
    service: entry.service,
    key: entry.key,
    generation: entry.generation,
    overprovisioningFactor: entry.cla.overprovisioningFactor,
    priorities: [...byPriority.entries()]
      .sort((a, b) => a[0] - b[0])
      .map(([priority, localities]) => ({ priority, localities })),
    bytes: entry.bytes.length,
  };
}

interface TreeNodeView {
  readonly value: string;
  readonly depth: number;
  readonly count: number;
  readonly children: readonly TreeNodeView[];
  /** Only on leaves, which are the only nodes that hold endpoints. */
  readonly endpoints?: readonly string[];
}

function treeView(tree: LocalityTree) {
  const view = (n: TreeNode): TreeNodeView => ({
    value: n.value,
    depth: n.depth,
    count: n.count,
    children: n.orderedChildren().map(view),
    ...(n.depth === tree.levels ? { endpoints: n.orderedEndpoints().map(endpointKey) } : {}),
  });
  return { scopes: tree.scopes, nodeCount: tree.nodeCount, endpoints: tree.size, root: view(tree.root) };
}

function serviceOf(mesh: MeshView, name: string): ServiceState {
  const service = mesh.get(name);
  if (!service) throw serviceNotFound(name);
  return service;
}

function serviceNotFound(name: string): CanopyError {
  return new CanopyError('CANOPY_SERVICE_NOT_FOUND', `service "${name}" not found`);
}

function badRequest(message: string): CanopyError {
  return new CanopyError('CANOPY_BAD_REQUEST', message);
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
