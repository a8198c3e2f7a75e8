/**
 * The admin endpoints the page reads. Every request carries the admin token
 * when one was entered (kept in sessionStorage, so it ends with the tab).
 */
import type { ExplainView as Explain } from '../../src/domain/explain.js';
import type { ServiceView } from '../../src/admin/ui-view.js';

export type { LoadPanel, ServiceView, ViewClient, ViewEndpoint, ViewNode } from '../../src/admin/ui-view.js';

export interface Locality {
  readonly region: string;
  readonly zone: string;
  readonly subzone: string;
}

export interface ServiceSummary {
  readonly name: string;
  readonly endpoints: number;
  readonly mode: string;
  readonly scopes: readonly string[];
}

/** GET /debug/explain: what one client placement is sent and why (the server's own type). */
export type { ExplainView as Explain } from '../../src/domain/explain.js';

/** Where a client runs, as /debug/explain's query takes it. */
export interface PlacementQuery {
  readonly locality: Locality;
  readonly network?: string;
  readonly node?: string;
  readonly cluster?: string;
  readonly labels?: Readonly<Record<string, string>>;
}

const TOKEN_KEY = 'canopy.adminToken';

export function adminToken(): string {
  return sessionStorage.getItem(TOKEN_KEY) ?? '';
}

export function setAdminToken(token: string): void {
  if (token) sessionStorage.setItem(TOKEN_KEY, token);
  else sessionStorage.removeItem(TOKEN_KEY);
}

export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

async function request(path: string, headers: Record<string, string> = {}): Promise<Response> {
  const token = adminToken();
  const res = await fetch(path, { headers: token ? { ...headers, authorization: `Bearer ${token}` } : headers });
  if (!res.ok && res.status !== 304) {
    let message = `${res.status} ${res.statusText}`;
    try {
      const body = (await res.json()) as { error?: { code?: string; message?: string } };
      if (body.error?.message) message = `${res.status} ${body.error.code ?? ''}: ${body.error.message}`;
    } catch {
      // Not JSON: the status line says enough.
    }
    throw new HttpError(res.status, message);
  }
  return res;
}

/** GET /api/v1/skipped: what the server leaves out of what it serves, and why (store/input-skips.ts). */
export interface SkippedEntry {
  readonly source: string;
  readonly object: string;
  readonly service: string;
  readonly path: string;
  readonly value?: string;
  readonly message: string;
  readonly left: 'endpoint' | 'service';
  readonly endpoints?: number;
  readonly since?: string;
}

export async function listSkipped(): Promise<SkippedEntry[]> {
  const res = await request('/api/v1/skipped');
  return ((await res.json()) as { skipped: SkippedEntry[] }).skipped;
}

export async function listServices(): Promise<ServiceSummary[]> {
  const res = await request('/ui/api/services');
  return ((await res.json()) as { services: ServiceSummary[] }).services;
}

/** The service's view, or undefined when it is unchanged since `etag`. */
export async function fetchView(
  service: string,
  etag: string | undefined,
): Promise<{ view: ServiceView; etag: string } | undefined> {
  const res = await request(`/ui/api/services/${encodeURIComponent(service)}`, etag ? { 'if-none-match': etag } : {});
  if (res.status === 304) return undefined;
  return { view: (await res.json()) as ServiceView, etag: res.headers.get('etag') ?? '' };
}

export function explainUrl(service: string, p: PlacementQuery): string {
  const q = new URLSearchParams({ service });
  const set = (k: string, v: string | undefined) => {
    if (v) q.set(k, v);
  };
  set('region', p.locality.region);
  set('zone', p.locality.zone);
  set('subzone', p.locality.subzone);
  set('network', p.network);
  set('node', p.node);
  set('cluster', p.cluster);
  for (const [k, v] of Object.entries(p.labels ?? {})) q.set(`label.${k}`, v);
  return `/debug/explain?${q.toString()}`;
}

export async function fetchExplain(service: string, p: PlacementQuery): Promise<Explain> {
  const res = await request(explainUrl(service, p));
  return (await res.json()) as Explain;
}
