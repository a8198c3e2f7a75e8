/**
 * The web view: the page bundled at build time (server/ui → dist/ui) served
 * at /ui/, the admin root redirecting there, and the JSON it polls. The page
 * reads the other admin views (/debug/explain, /debug/clients) directly.
 */
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { CanopyError } from '../domain/errors.js';
import type { ServiceState } from '../domain/mesh.js';
import type { MeshView } from '../store/mesh-feed.js';
import type { ClientStatus } from '../sessions/client-status.js';
import type { LoadReportInput } from '../domain/load/load-explain.js';
import { loadPanel, placeClients, treeView } from './ui-view.js';

export interface UiDeps {
  readonly mesh: MeshView;
  readonly clients: () => readonly ClientStatus[];
  /** Load-aware services: the load controller's last interval. */
  readonly load?: (service: string) => LoadReportInput | undefined;
}

/** The bundle's files, by name: nothing else under /ui/ is read from disk. */
const BUNDLE: Readonly<Record<string, string>> = {
  'index.html': 'text/html; charset=utf-8',
  'app.js': 'text/javascript; charset=utf-8',
  'app.css': 'text/css; charset=utf-8',
};
const BUNDLE_DIR = new URL('../../../ui/', import.meta.url);

export function uiRoutes(app: FastifyInstance, deps: UiDeps): void {
  const files = new Map<string, Promise<Buffer>>();
  const bundled = (name: string): Promise<Buffer> => {
    let file = files.get(name);
    if (!file) {
      file = readFile(new URL(name, BUNDLE_DIR));
      files.set(name, file);
      // A missing bundle (tsc run without the UI build) is retried, not cached.
      file.catch(() => files.delete(name));
    }
    return file;
  };
  const sendFile = async (name: string, reply: FastifyReply) => {
    const type = BUNDLE[name];
    if (!type) throw new CanopyError('CANOPY_NOT_FOUND', `no file ${name} in the web view`);
    let body: Buffer;
    try {
      body = await bundled(name);
    } catch {
      throw new CanopyError(
        'CANOPY_NOT_FOUND',
        `the web view is not built (npm run build bundles it): ${name} missing`,
      );
    }
    return reply.type(type).header('cache-control', 'no-cache').send(body);
  };

  app.get('/', (_req, reply) => reply.redirect('/ui/'));
  app.get('/ui', (_req, reply) => reply.redirect('/ui/'));
  app.get('/ui/', (_req, reply) => sendFile('index.html', reply));
  app.get<{ Params: { file: string } }>('/ui/:file', (req, reply) => sendFile(req.params.file, reply));

  app.get('/ui/api/services', async () => ({
    services: deps.mesh.list().map((s) => ({
      name: s.name,
      endpoints: s.endpoints.size,
      mode: s.spec.loadBalancing.mode,
      scopes: s.tree.scopes,
    })),
  }));

  // Polled by the page, once a second per open tab: the tree part is built and hashed once per service
  // change, each poll only places the clients, and an unchanged view is a 304 without a body.
  const trees = new WeakMap<ServiceState, { generation: number; json: string; hash: string }>();
  app.get<{ Params: { service: string } }>('/ui/api/services/:service', async (req, reply) => {
    const service = deps.mesh.get(req.params.service);
    if (!service) throw new CanopyError('CANOPY_SERVICE_NOT_FOUND', `service "${req.params.service}" not found`);
    let tree = trees.get(service);
    if (tree?.generation !== service.generation) {
      const json = JSON.stringify(treeView(service));
      tree = { generation: service.generation, json, hash: digest(json) };
      trees.set(service, tree);
    }
    const panel = loadPanel(service, deps.load?.(service.name));
    const clients = `"clients":${JSON.stringify(placeClients(service, deps.clients()))}${panel ? `,"load":${JSON.stringify(panel)}` : ''}`;
    const etag = `"${tree.hash}.${digest(clients)}"`;
    reply.header('etag', etag).header('cache-control', 'no-cache');
    if (req.headers['if-none-match'] === etag) return reply.code(304).send();
    // The ServiceView: the tree's object with the clients (and a load-aware service's load) added.
    return reply.type('application/json; charset=utf-8').send(`${tree.json.slice(0, -1)},${clients}}`);
  });
}

function digest(text: string): string {
  return createHash('sha1').update(text).digest('base64url');
}
