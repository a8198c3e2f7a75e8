/**
 * The admin API: built apart from listen() so tests drive it with inject().
 * Every error has one shape, `{ error: { code, message, fields? } }`, with a
 * stable code from the catalog in README.
 */
import Fastify, { type FastifyInstance, type FastifyReply } from 'fastify';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import type { ClaCache } from '../domain/cla-cache.js';
import type { FieldError } from '../domain/errors.js';
import type { Placement } from '../domain/locality.js';
import type { TreeNode } from '../domain/locality-tree.js';
import type { ServiceState } from '../domain/mesh.js';
import { endpointKey } from '../domain/service.js';
import { endpointToJson, parseServiceSpec, patchEndpoint, serviceSpecToJson } from '../domain/spec.js';
import type { ServiceStore } from '../store/service-store.js';
import type { ClientStatus } from '../xds/client-status.js';

export interface AdminDeps {
  readonly store: ServiceStore;
  readonly claCache: ClaCache;
  readonly clients: () => readonly ClientStatus[];
  readonly registry: Registry;
  readonly logger?: Logger;
  readonly ready: () => boolean;
}

export type AdminErrorCode =
  | 'CANOPY_INVALID_SERVICE'
  | 'CANOPY_SERVICE_NOT_FOUND'
  | 'CANOPY_ENDPOINT_NOT_FOUND'
  | 'CANOPY_BAD_REQUEST'
  | 'CANOPY_NOT_FOUND'
  | 'CANOPY_NOT_READY'
  | 'CANOPY_INTERNAL';

function sendError(reply: FastifyReply, status: number, code: AdminErrorCode, message: string, fields?: readonly FieldError[]) {
  return reply.code(status).send({ error: { code, message, ...(fields ? { fields } : {}) } });
}

export function buildAdminApp(deps: AdminDeps): FastifyInstance {
  const app: FastifyInstance = deps.logger
    ? // Request logs are info-level: keep them out of the server log unless it runs at debug.
      (Fastify({ loggerInstance: deps.logger.child({}, { level: deps.logger.level === 'debug' ? 'debug' : 'warn' }) }) as unknown as FastifyInstance)
    : Fastify({ logger: false });
  const { store } = deps;

  app.setErrorHandler((err: { statusCode?: number; message: string }, _req, reply) => {
    const status = err.statusCode ?? 500;
    if (status < 500) return sendError(reply, status, 'CANOPY_BAD_REQUEST', err.message);
    deps.logger?.error({ err }, 'admin request failed');
    return sendError(reply, 500, 'CANOPY_INTERNAL', 'internal error');
  });
  app.setNotFoundHandler((req, reply) => sendError(reply, 404, 'CANOPY_NOT_FOUND', `no route ${req.method} ${req.url}`));

  const serviceOr404 = (name: string, reply: FastifyReply): ServiceState | undefined => {
    const s = store.mesh.get(name);
    if (!s) void sendError(reply, 404, 'CANOPY_SERVICE_NOT_FOUND', `service "${name}" not found`);
    return s;
  };

  app.get('/api/v1/services', async () => ({ services: store.mesh.list().map((s) => serviceSpecToJson(s.spec)) }));

  app.get<{ Params: { name: string } }>('/api/v1/services/:name', async (req, reply) => {
    const s = serviceOr404(req.params.name, reply);
    return s ? serviceSpecToJson(s.spec) : reply;
  });

  app.put<{ Params: { name: string } }>('/api/v1/services/:name', async (req, reply) => {
    const name = req.params.name;
    const body = req.body;
    if (typeof body !== 'object' || body === null || Array.isArray(body)) {
      return sendError(reply, 400, 'CANOPY_INVALID_SERVICE', 'the body must be a service object', [
        { path: '', message: 'must be an object' },
      ]);
    }
    const input = { name, ...(body as Record<string, unknown>) };
    if ((body as Record<string, unknown>)['name'] !== undefined && (body as Record<string, unknown>)['name'] !== name) {
      return sendError(reply, 400, 'CANOPY_INVALID_SERVICE', 'name in the body differs from the path', [
        { path: 'name', message: `must equal the path's "${name}"` },
      ]);
    }
    const parsed = parseServiceSpec(input);
    if (!parsed.ok) return sendError(reply, 400, 'CANOPY_INVALID_SERVICE', 'invalid service', parsed.errors);
    const existed = store.mesh.get(name) !== undefined;
    store.put(parsed.value);
    return reply.code(existed ? 200 : 201).send(serviceSpecToJson(parsed.value));
  });

  app.delete<{ Params: { name: string } }>('/api/v1/services/:name', async (req, reply) => {
    if (!store.delete(req.params.name)) return sendError(reply, 404, 'CANOPY_SERVICE_NOT_FOUND', `service "${req.params.name}" not found`);
    return reply.code(204).send();
  });

  app.patch<{ Params: { name: string; endpoint: string } }>('/api/v1/services/:name/endpoints/:endpoint', async (req, reply) => {
    const s = serviceOr404(req.params.name, reply);
    if (!s) return reply;
    const current = s.endpoints.get(req.params.endpoint);
    if (!current) {
      return sendError(reply, 404, 'CANOPY_ENDPOINT_NOT_FOUND', `service "${s.name}" has no endpoint ${req.params.endpoint} (use address:port)`);
    }
    const patched = patchEndpoint(current, req.body);
    if (!patched.ok) return sendError(reply, 400, 'CANOPY_INVALID_SERVICE', 'invalid endpoint change', patched.errors);
    const key = endpointKey(current);
    store.put({ ...s.spec, endpoints: s.spec.endpoints.map((e) => (endpointKey(e) === key ? patched.value : e)) });
    return endpointToJson(patched.value);
  });

  app.get<{ Querystring: Record<string, string | undefined> }>('/debug/cla', async (req, reply) => {
    const q = req.query;
    if (!q['service']) return sendError(reply, 400, 'CANOPY_BAD_REQUEST', 'query parameter "service" is required');
    const s = serviceOr404(q['service'], reply);
    if (!s) return reply;
    const labels: Record<string, string> = {};
    for (const [k, v] of Object.entries(q)) if (k.startsWith('label.') && v !== undefined) labels[k.slice(6)] = v;
    const placement: Placement = {
      locality: { region: q['region'] ?? '', zone: q['zone'] ?? '', subzone: q['subzone'] ?? '' },
      network: q['network'] ?? '',
      node: q['node'] ?? '',
      cluster: q['cluster'] ?? '',
      labels,
    };
    const entry = deps.claCache.lookup(s, placement);
    const priorities: { priority: number; localities: unknown[] }[] = [];
    for (const g of entry.cla.groups) {
      let p = priorities[g.priority];
      if (!p) priorities[g.priority] = p = { priority: g.priority, localities: [] };
      p.localities.push({
        locality: g.locality,
        weight: g.weight,
        endpoints: g.endpoints.map((e) => ({ address: e.address, port: e.port, weight: e.weight })),
      });
    }
    return {
      service: s.name,
      key: entry.key,
      generation: entry.generation,
      overprovisioningFactor: entry.cla.overprovisioningFactor,
      priorities,
      bytes: entry.bytes.length,
    };
  });

  app.get<{ Params: { service: string } }>('/debug/tree/:service', async (req, reply) => {
    const s = serviceOr404(req.params.service, reply);
    if (!s) return reply;
    const levels = s.tree.levels;
    const node = (n: TreeNode): object => ({
      value: n.value,
      depth: n.depth,
      count: n.count,
      ...(n.depth === levels
        ? { endpoints: n.orderedEndpoints().map(endpointKey) }
        : { children: n.orderedChildren().map(node) }),
    });
    return { scopes: s.tree.scopes, nodeCount: s.tree.nodeCount, endpoints: s.tree.size, root: node(s.tree.root) };
  });

  app.get('/debug/clients', async () => ({ clients: deps.clients() }));
  app.get('/healthz', async () => ({ status: 'ok' }));
  app.get('/readyz', async (_req, reply) =>
    deps.ready() ? { status: 'ready' } : sendError(reply, 503, 'CANOPY_NOT_READY', 'starting or shutting down'),
  );
  app.get('/metrics', async (_req, reply) => {
    const body = await deps.registry.metrics();
    return reply.type(deps.registry.contentType).send(body);
  });
  return app;
}
