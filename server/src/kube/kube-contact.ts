/**
 * Whether the API server answers, as the Kubernetes source's lists and
 * watches find it (kube-source.ts): which paths fail since when, the last
 * error (logged once per new message), and what readiness says about it.
 */
import type { Logger } from 'pino';
import { describeKubeError, statusOf } from './kube-watch.js';

interface Failure {
  readonly since: number;
  readonly message: string;
  /** 401 or 403: not a passing outage. */
  readonly refused: boolean;
}

export class KubeContact {
  private readonly failing = new Map<string, Failure>();
  private last: string | undefined;
  /** Failed lists and watches so far. */
  errors = 0;

  constructor(
    private readonly log: Logger,
    /** Not ready once the API server has not answered for this long. */
    private readonly unreachableMs: number,
  ) {}

  get connected(): boolean {
    return this.failing.size === 0;
  }

  get lastError(): string | undefined {
    return this.last;
  }

  /** Epoch ms of the oldest list or watch failing now; undefined while the API server answers. */
  get failingSince(): number | undefined {
    const since = [...this.failing.values()].map((f) => f.since);
    return since.length ? Math.min(...since) : undefined;
  }

  /** Why /readyz should answer 503 as far as contact goes, given whether the first full list is in. */
  notReady(synced: boolean, now: number): string | undefined {
    // Refused: not a passing outage, so not ready at once, whatever the threshold.
    const refused = [...this.failing.values()].find((f) => f.refused);
    if (refused) return `kubernetes: ${refused.message}`;
    if (!synced) return this.last ? `kubernetes: ${this.last}` : 'kubernetes: waiting for the first full list';
    const since = this.failingSince;
    if (since !== undefined && now - since > this.unreachableMs)
      return `kubernetes: the API server has not answered for ${Math.round((now - since) / 1000)} s: ${this.last}`;
    return undefined;
  }

  /** A list or watch of `path` answered (`err` undefined) or failed. */
  report(kind: string, path: string, err: unknown): void {
    if (err === undefined) {
      if (this.failing.delete(path) && this.failing.size === 0)
        this.log.info({}, 'kubernetes: the API server answers again');
      if (this.failing.size === 0) this.last = undefined;
      return;
    }
    this.errors++;
    const message = describeKubeError(path.slice(path.lastIndexOf('/') + 1), err);
    const status = statusOf(err);
    const since = this.failing.get(path)?.since ?? Date.now();
    this.failing.set(path, { since, message, refused: status === 401 || status === 403 });
    if (message !== this.last) this.log.error({ resource: kind, path }, message);
    this.last = message;
  }
}
