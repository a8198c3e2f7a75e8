/**
 * `canopy get skipped`: what the server leaves out of what it serves because the admin API's rules refuse
 * it (a Kubernetes EndpointSlice's port 70000, a multicast address, a bad name), with the object, the field,
 * the value and why. Empty when every source's input is served.
 */
import { adminJson } from './admin-client.js';
import { CliError, serverError, type AdminTarget } from './common.js';
import { printList, type PrintOptions } from './output.js';

interface SkipJson {
  source: string;
  object: string;
  service: string;
  path: string;
  value?: string;
  message: string;
  reason: string;
  left: 'endpoint' | 'service';
  endpoints?: number;
  since?: string;
}

export async function getSkipped(opts: AdminTarget & PrintOptions): Promise<void> {
  const { status, body } = await adminJson<{ skipped: SkipJson[] }>(opts, '/api/v1/skipped');
  if (status !== 200) throw new CliError(`GET /api/v1/skipped: ${status} ${serverError(body)}`);
  const skipped = body.skipped;
  printList(opts, { skipped }, () => ({
    headers: ['SOURCE', 'OBJECT', 'FIELD', 'VALUE', 'LEFT OUT', 'WHY'],
    rows: skipped.map((s) => [
      s.source,
      s.object,
      s.path || '-',
      s.value ?? '-',
      s.left === 'service' ? `service ${s.service}` : `${s.endpoints ?? 1} endpoint(s) of ${s.service}`,
      s.message,
    ]),
    wideHeaders: ['REASON', 'SINCE'],
    wideRows: skipped.map((s) => [s.reason, s.since ?? '-']),
    names: skipped.map((s) => `skipped/${s.source}/${s.object}`),
  }));
}
