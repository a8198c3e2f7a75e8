/**
 * When `canopy serve` says it is ready: only once /readyz would answer 200
 * (admin/app.ts reads the same conditions through serve/edges.ts), so a
 * Kubernetes source's first full sync is written before "canopy ready" is
 * logged and "canopy: ready" printed. Until then it logs that it serves and
 * why it is not ready yet.
 */
import type { Logger } from 'pino';
import type { MeshFeed } from '../store/mesh-feed.js';

export interface Readiness {
  /** Why /readyz answers 503 now; undefined when it answers 200. */
  notReady(): string | undefined;
  /** Resolves once, when "canopy ready" is logged. */
  whenReady(): Promise<void>;
}

export function startReadiness(o: {
  readonly started: () => boolean;
  readonly feed: MeshFeed;
  readonly kube?: { notReady(): string | undefined } | undefined;
  readonly logger: Logger;
  readonly address: Readonly<Record<string, string>>;
}): Readiness {
  const notReady = (): string | undefined =>
    !o.started() ? 'shutting down' : !o.feed.connected ? 'the store is unreachable' : o.kube?.notReady();
  const waiting = notReady();
  if (waiting !== undefined) o.logger.info({ ...o.address, waiting }, `canopy serving; not ready yet: ${waiting}`);
  const ready = untilReady(notReady).then(() =>
    o.logger.info({ ...o.address, services: o.feed.mesh.size }, 'canopy ready'),
  );
  return { notReady, whenReady: () => ready };
}

/** Resolves when `notReady` says nothing; asked again every 50 ms (it is a few field reads). */
function untilReady(notReady: () => string | undefined): Promise<void> {
  return new Promise((resolve) => {
    const check = (): void => {
      if (notReady() === undefined) resolve();
      else setTimeout(check, 50).unref();
    };
    check();
  });
}
