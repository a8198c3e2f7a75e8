/**
 * What every benchmark section shares: the synthetic mesh (3-level
 * localities), the clients, and how time is measured.
 */
import type { Placement } from '../server/src/domain/locality.js';
import type { Endpoint, ServiceSpec } from '../server/src/domain/service.js';

/** N endpoints over up to 1,000 leaves: 10 regions × 10 zones × 10 subzones. */
export function makeEndpoints(n: number, leaves = Math.max(1, Math.min(1000, Math.floor(n / 10)))): Endpoint[] {
  return Array.from({ length: n }, (_, i) => makeEndpoint(i, leaves));
}

export function makeEndpoint(i: number, leaves: number): Endpoint {
  const leaf = i % leaves;
  return {
    address: `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`,
    port: 8080,
    locality: {
      region: `r${leaf % 10}`,
      zone: `z${Math.floor(leaf / 10) % 10}`,
      subzone: `s${Math.floor(leaf / 100)}`,
    },
    network: '',
    node: '',
    cluster: '',
    labels: {},
    health: 'healthy',
    weight: 1,
  };
}

/** C clients over L distinct localities; a quarter of them match no subzone, a few no region. */
export function makeClients(c: number, l: number): Placement[] {
  return Array.from({ length: c }, (_, i) => {
    const k = i % l;
    const region = k % 37 === 36 ? `rx${k}` : `r${k % 10}`;
    const zone = `z${Math.floor(k / 10) % 10}`;
    const subzone = k % 4 === 3 ? `sx${k}` : `s${Math.floor(k / 100) % 10}`;
    return { locality: { region, zone, subzone }, network: '', node: '', cluster: '', labels: {} };
  });
}

export function failoverService(name: string, endpoints: readonly Endpoint[]): ServiceSpec {
  return {
    name,
    loadBalancing: {
      mode: 'failover',
      routingPreference: ['region', 'zone', 'subzone'],
      crossNetworkFailover: true,
      overprovisioningFactor: 140,
    },
    endpoints,
  };
}

/** Collects garbage before a timed section when node runs with --expose-gc, so one section's garbage is not billed to the next. */
export function settleHeap(): void {
  (globalThis as { gc?: () => void }).gc?.();
}

/**
 * Collects garbage and waits for V8's helper threads (concurrent sweeping,
 * background compilation) to go quiet, so their CPU time is not billed to
 * the next timed section: process CPU time counts every thread.
 */
export async function quiesce(): Promise<void> {
  settleHeap();
  await new Promise((r) => setTimeout(r, 100));
}

/** CPU time (user + system) of `fn`, in ms. Call `quiesce` first where helper threads may still be busy. */
export function cpu<T>(fn: () => T): { ms: number; value: T } {
  const start = process.cpuUsage();
  const value = fn();
  const used = process.cpuUsage(start);
  return { ms: (used.user + used.system) / 1000, value };
}

/** Wall time of `fn`, in ms (for sub-millisecond sections, where CPU time is too coarse). */
export function wall<T>(fn: () => T): { ms: number; value: T } {
  const start = process.hrtime.bigint();
  const value = fn();
  return { ms: Number(process.hrtime.bigint() - start) / 1e6, value };
}

export function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2;
}

export function percentile(xs: readonly number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))] as number;
}

export function round(x: number, digits = 2): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}
