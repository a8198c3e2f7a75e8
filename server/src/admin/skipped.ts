/**
 * What Canopy leaves out of what it serves (store/input-skips.ts): the admin
 * API's `GET /api/v1/skipped` (what `canopy get skipped` and the web view
 * read), and its metrics: `canopy_input_skipped_total{source,reason}` counts
 * each entry once when it appears, `canopy_input_skipped{source,reason}` is
 * what is left out now.
 */
import type { FastifyInstance } from 'fastify';
import { Counter, Gauge, type Registry } from 'prom-client';
import type { InputSkips } from '../store/input-skips.js';
import type { AdminDeps } from './deps.js';

export function skippedRoute(app: FastifyInstance, deps: AdminDeps): void {
  app.get('/api/v1/skipped', async () => ({ skipped: deps.skips?.list() ?? [] }));
}

export function registerSkipMetrics(registry: Registry, skips: InputSkips): void {
  const registers = [registry];
  const labelNames = ['source', 'reason'] as const;
  const total = new Counter({
    name: 'canopy_input_skipped_total',
    help: 'Objects, endpoints and fields left out of what is served because the admin API rules refuse them',
    labelNames,
    registers,
  });
  skips.listen({ added: (s) => total.inc({ source: s.source, reason: s.reason }) });
  new Gauge({
    name: 'canopy_input_skipped',
    help: 'Entries left out of what is served now (GET /api/v1/skipped lists them)',
    labelNames,
    registers,
    collect() {
      this.reset();
      for (const c of skips.counts()) this.set({ source: c.source, reason: c.reason }, c.count);
    },
  });
}
